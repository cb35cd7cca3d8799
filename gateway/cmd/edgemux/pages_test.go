package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

// written lives in the executable's writable data (initialised, so not
// in .bss); releasing it would bring back the 1 from the file.
var written = 1

// TestReleaseStartupPages: the executable's read-only mappings shrink to
// what this test touches after the release, and the writable ones keep
// what was written to them.
func TestReleaseStartupPages(t *testing.T) {
	written = 2
	before := mappedReadOnlyKiB(t)
	n, err := releaseStartupPages()
	if err != nil {
		t.Fatal(err)
	}
	after := mappedReadOnlyKiB(t)
	t.Logf("released %d KiB of ranges; mapped read-only %d KiB before, %d KiB after", n>>10, before, after)
	if n == 0 {
		t.Fatal("no range of the executable found")
	}
	if before < 1024 || after > before/2 {
		t.Errorf("mapped read-only: %d KiB before, %d KiB after the release", before, after)
	}
	if written != 2 {
		t.Errorf("a writable page was released: written = %d, want 2", written)
	}
}

// mappedReadOnlyKiB sums the RSS of the executable's read-only mappings
// that releaseStartupPages finds, from /proc/self/smaps.
func mappedReadOnlyKiB(t *testing.T) int {
	t.Helper()
	spans, err := readOnlyExecutableSpans()
	if err != nil {
		t.Fatal(err)
	}
	ours := map[uint64]bool{}
	for _, s := range spans {
		ours[uint64(s.lo)] = true
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kib, in := 0, false
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		field := strings.Fields(lines.Text())
		switch {
		case len(field) >= 5 && strings.Contains(field[0], "-"):
			lo, _, _ := strings.Cut(field[0], "-")
			start, err := strconv.ParseUint(lo, 16, 64)
			in = err == nil && ours[start]
		case in && len(field) == 3 && field[0] == "Rss:":
			v, _ := strconv.Atoi(field[1])
			kib += v
		}
	}
	return kib
}

// TestReleaseStartupPagesPIE: in a position-independent build, whose
// loader writes relocated pointers into a mapping and then makes it
// read-only, the gateway releases its pages and keeps serving through a
// reload and a drain (released, those pointers would be the file's
// unrelocated ones, and the gateway would crash at its first interface
// call).
func TestReleaseStartupPagesPIE(t *testing.T) {
	bin := buildBinary(t, "-buildmode=pie")
	cfgFile := filepath.Join(t.TempDir(), "edgemux.yaml")
	os.WriteFile(cfgFile, []byte("listen: 127.0.0.1:0\nloops: 1\nlog: {level: debug}\n"), 0o644)
	cmd, logs := spawn(t, bin, "run", "-c", cfgFile)
	addr := regexp.MustCompile(`listen=(127\.0\.0\.1:\d+)`).FindStringSubmatch(waitLog(t, logs, `msg="edgemux started"`))[1]
	released := regexp.MustCompile(`bytes=(\d+)`).FindStringSubmatch(waitLog(t, logs, `msg="start-up pages released"`))
	if n, _ := strconv.Atoi(released[1]); n == 0 {
		t.Fatal("released nothing")
	}
	ping := func(when string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dev, err := private.Dial(ctx, addr, "pie-"+when, private.ClientOptions{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer dev.Close()
		if err := dev.Ping(ctx); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	ping("after start")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, logs, `msg="reload ok"`)
	waitLog(t, logs, `msg="start-up pages released"`)
	ping("after reload")
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
