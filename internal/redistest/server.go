package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// startTimeout bounds how long Server waits for redis-server to answer.
const startTimeout = 10 * time.Second

// Server is a redis-server process of a test's own, on a loopback port,
// that the test may stop and start again on the same address: to show what
// happens to calls while Redis is down. Its data lives in memory only.
type Server struct {
	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
}

// StartServer starts a private redis-server on a free loopback port and
// stops it when the test ends. When no redis-server binary is on the PATH,
// it fails the test if the environment variable CI is "true" and skips it
// otherwise, saying how to install one.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redistest: no redis-server on the PATH (" + err.Error() + "); install one with `apt-get install -y redis-server`"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: the integration tests need it)", msg)
			return nil
		}
		t.Skip(msg)
		return nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{t: t, bin: bin, port: port}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr returns the server's host:port, the same across Stop and Start.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server if it is stopped and returns once it answers a
// PING. Call it outside a synctest bubble: it waits for a real process.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting %s: %v", s.bin, err)
	}
	s.cmd = cmd
	c := newClient(s.Addr(), -1)
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redistest: redis-server on %s did not answer within %v: %v", s.Addr(), startTimeout, err)
		}
		time.Sleep(10 * time.Millisecond) // waiting for a process to listen, not timing a test
	}
}

// Stop kills the server, if it runs, and waits for it to exit: from then
// on connections to Addr are refused.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	err := s.cmd.Wait()
	s.cmd = nil
	if err != nil && !isKilled(err) {
		s.t.Errorf("redistest: redis-server on %s: %v", s.Addr(), err)
	}
}

func isKilled(err error) bool {
	ee, ok := err.(*exec.ExitError)
	return ok && !ee.Exited()
}

// String describes the server for test messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr()) }
