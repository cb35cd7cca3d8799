package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logServer runs a server on the config in file, logging to the returned
// buffer, until the test ends.
func logServer(t *testing.T, file string) (*server, *syncBuffer) {
	t.Helper()
	var logs syncBuffer
	s, err := newServer(file, &logs)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.g.Run(context.Background()) }()
	select {
	case <-s.g.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		s.g.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, &logs
}

// newLines returns the lines logged since the last call (mark holds the
// offset).
func newLines(logs *syncBuffer, mark *int) []string {
	all := logs.String()
	fresh := all[*mark:]
	*mark = len(all)
	return strings.Split(strings.TrimSuffix(fresh, "\n"), "\n")
}

func TestStartupLog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edgemux.yaml")
	os.WriteFile(file, []byte("listen: 127.0.0.1:0\nloops: 1\n"), 0o644)
	s, logs := logServer(t, file)
	mark := len(logs.String())
	s.started()
	lines := newLines(logs, &mark)
	addr := s.g.Addr().String()
	want := []string{`msg="edgemux started"`, "version=", "config=" + file, "listen=" + addr,
		"routes=private->private,websocket->websocket,modbus->modbus,coap->coap,http->admin,*->quarantine",
		"dashboard=http://" + addr + "/ ", "metrics=http://" + addr + "/metrics"}
	if len(lines) != 1 {
		t.Fatalf("start-up logged %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, w := range want {
		if !strings.Contains(lines[0]+" ", w) {
			t.Errorf("start-up line lacks %q:\n%s", w, lines[0])
		}
	}
	s.file = "" // as when run without -c
	if line := newLinesAfter(s.started, logs, &mark); !strings.Contains(line, `config="built-in defaults"`) {
		t.Errorf("without a file: %s", line)
	}
}

func newLinesAfter(f func(), logs *syncBuffer, mark *int) string {
	f()
	return strings.Join(newLines(logs, mark), "\n")
}

// TestReloadLog: each reload logs one line that names the changed keys
// and the outcome; the websocket section logs its reload only when it
// changed; a failure says so once, and that the old config stays.
func TestReloadLog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edgemux.yaml")
	base := "listen: 127.0.0.1:0\nloops: 1\nlog: {level: debug}\n"
	os.WriteFile(file, []byte(base), 0o644)
	s, logs := logServer(t, file)
	mark := len(logs.String())
	for _, c := range []struct {
		name, yaml string
		want       []string // one line each, in this order
		also       string   // and the last line says this too
	}{
		{"no-op", base, []string{`level=INFO msg="reload ok" changed=[]`}, ""},
		{"a key", base + "sniff: {budget: 600}\n", []string{`level=INFO msg="reload ok" changed=[sniff.budget]`}, ""},
		{"websocket", base + "sniff: {budget: 600}\nwebsocket: {path: /live}\n", []string{
			`level=DEBUG msg=reloaded component=websocket path=/live`,
			`level=INFO msg="reload ok" changed=[websocket.path]`}, ""},
		{"restart", base + "sniff: {budget: 600}\nwebsocket: {path: /live}\nprivate: {max_topic: 128}\n", []string{
			`level=WARN msg="reload ok, some changes need a restart" changed=[private.max_topic] needs_restart=[private.max_topic]`}, ""},
		{"invalid", base + "sniff: {budget: -1}\n", []string{
			`level=ERROR msg="reload failed, old config stays" err=`}, `sniff.budget: must be between 16 and 65536, not -1 (line 4)`},
		{"not yaml", base + "sniff: [\n", []string{
			`level=ERROR msg="reload failed, old config stays" err=`}, ""},
		{"back to base", base, []string{
			`level=DEBUG msg=reloaded component=websocket path=/ws`,
			`level=INFO msg="reload ok" changed=[sniff.budget,private.max_topic,websocket.path]`}, ""},
	} {
		os.WriteFile(file, []byte(c.yaml), 0o644)
		s.reload()
		lines := newLines(logs, &mark)
		if len(lines) != len(c.want) {
			t.Errorf("%s: %d lines, want %d:\n%s", c.name, len(lines), len(c.want), strings.Join(lines, "\n"))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("%s: line %q, want %q", c.name, lines[i], w)
			}
			if strings.Count(lines[i], "component=") > 1 {
				t.Errorf("%s: component twice: %s", c.name, lines[i])
			}
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, c.also) || strings.Count(last, "must be") > 1 {
			t.Errorf("%s: line %q, want %q once", c.name, last, c.also)
		}
	}
}
