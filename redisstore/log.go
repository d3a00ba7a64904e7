package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// go-redis logs what it does not return (a pool's failed dial, a
// connection dropped from the pool, a recovered panic) through one
// process-wide logger, redis.SetLogger's, which by default writes to the
// process's standard error through a log.Logger of its own, outside slog
// and outside the standard logger's settings. Importing this package
// replaces it, once, as the program starts, by a logger that sends each
// message to slog.Default() (as it is when the message is logged) as a
// Debug record with the attribute logger=go-redis: silent under slog's
// default level (Info), seen when the program logs at Debug.
//
// go-redis cannot tell whether a logger was set, so the replacement is
// made in this package's initialization, before main and before any
// client exists: a redis.SetLogger the program makes in main, or in the
// initialization of any package that imports this one, comes after it and
// wins. (Only one made in a package initialized before this one, which
// does not import it, is replaced.)
func init() { redis.SetLogger(slogLogger{}) }

// slogLogger is go-redis's logger, sending each message to slog.Default()
// at Debug.
type slogLogger struct{}

// Printf logs the message format and v make, when slog.Default() takes
// Debug records; formatting is skipped when it does not.
func (slogLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l := slog.Default()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	l.LogAttrs(ctx, slog.LevelDebug, strings.TrimSpace(fmt.Sprintf(format, v...)), slog.String("logger", "go-redis"))
}
