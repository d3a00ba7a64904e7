package backstop_test

import (
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goRedis is the module path of go-redis, which only redisstore imports.
const goRedis = "github.com/redis/go-redis/v9"

// goTool returns the go command, skipping the test without one (failing it
// under CI, which runs the whole suite with one).
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no go command on the PATH: %v", err)
		}
		t.Skipf("no go command on the PATH: %v", err)
	}
	return path
}

// Issue 13: a program that builds a chain without Redis linked all of
// go-redis, because breaker, budget, cache and chain imported it. Only
// redisstore imports it now: testdata/linking/noredis (a chain on the
// Anthropic adapter and the fake provider) must not link it, and
// testdata/linking/withredis (the same chain shared through redisstore)
// must, so that the first check cannot pass for want of looking. The
// binaries' module lists are what `go version -m` prints.
func TestOnlyRedisstoreLinksGoRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; CI runs it without -short")
	}
	goBin := goTool(t)
	dir := t.TempDir()
	cmd := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator), "./testdata/linking/noredis", "./testdata/linking/withredis")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the fixtures: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		program string
		links   bool
	}{{"noredis", false}, {"withredis", true}} {
		bin := filepath.Join(dir, tc.program)
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			bin += ".exe"
			if info, err = buildinfo.ReadFile(bin); err != nil {
				t.Fatalf("%s: %v", tc.program, err)
			}
		}
		var mods []string
		for _, d := range info.Deps {
			mods = append(mods, d.Path)
		}
		if got := slices.Contains(mods, goRedis); got != tc.links {
			t.Errorf("%s links %s: %v; want %v. Its modules:\n  %s", tc.program, goRedis, got, tc.links, strings.Join(mods, "\n  "))
		}
	}
}

// The rule behind it, package by package: no package of the module but
// redisstore imports go-redis, bar commands (which build the clients they
// give it) and internal/redistest (the tests' Redis, imported by tests
// only).
func TestOnlyRedisstoreImportsGoRedis(t *testing.T) {
	goBin := goTool(t)
	out, err := exec.Command(goBin, "list", "-f", "{{.ImportPath}} {{.Name}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	const module = "github.com/backstop-llm/backstop"
	allowed := []string{module + "/redisstore", module + "/internal/redistest"}
	var importers []string
	for line := range bytes.Lines(out) {
		f := strings.Fields(string(line))
		if len(f) < 2 || f[1] == "main" || slices.Contains(allowed, f[0]) {
			continue
		}
		for _, imp := range f[2:] {
			if imp == goRedis || strings.HasPrefix(imp, goRedis+"/") {
				importers = append(importers, f[0])
			}
		}
	}
	if len(importers) != 0 {
		t.Errorf("packages importing %s besides redisstore: %s", goRedis, strings.Join(importers, ", "))
	}
	if !bytes.Contains(out, []byte(module+"/redisstore redisstore ")) || !bytes.Contains(out, []byte(goRedis)) {
		t.Errorf("go list did not list redisstore importing %s:\n%s", goRedis, out)
	}
}
