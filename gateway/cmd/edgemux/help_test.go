package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// buildBinary builds edgemux into a temporary directory, with extra go
// build flags.
func buildBinary(t *testing.T, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "edgemux")
	args := append(append([]string{"build", "-o", bin}, flags...), ".")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// TestHelp: every way of asking lists every command with its line; help
// COMMAND and COMMAND -h show its flags; an unknown command is a usage
// error with the list on stderr.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		code, out, errOut := cli(t, "", args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: code %d stderr %q", args, code, errOut)
		}
		for _, c := range commands {
			if !strings.Contains(out, "  "+c.name+" ") || !strings.Contains(out, c.summary) {
				t.Errorf("%v: no line for %s:\n%s", args, c.name, out)
			}
		}
	}
	flagsOf := map[string][]string{
		"run":   {"-c string", "EDGEMUX_CONFIG", "-drain"},
		"check": {"-c string"},
		"pub":   {"-t string", "-m string", "-s string", "127.0.0.1:5020", "-stdin"},
		"sub":   {"-t value", "-C int", "-W duration", "-json", "-R"},
		"get":   {"-t string", "-json"},
	}
	for name, want := range flagsOf {
		for _, args := range [][]string{{"help", name}, {name, "-h"}} {
			code, out, _ := cli(t, "", args...)
			if code != 0 || !strings.HasPrefix(out, "Usage: edgemux "+name+" ") {
				t.Fatalf("%v: code %d:\n%s", args, code, out)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("%v lacks %q:\n%s", args, w, out)
				}
			}
		}
	}
	for _, args := range [][]string{{"frobnicate"}, {"help", "frobnicate"}} {
		code, out, errOut := cli(t, "", args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "Commands:") {
			t.Errorf("%v: code %d out %q err %q", args, code, out, errOut)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "edgemux ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: code %d out %q", code, out)
	}
}

// TestVersionFromToolchain: the module version, the revision with
// +dirty, and the commit time, as the toolchain records them.
func TestVersionFromToolchain(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "6250c0e4"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	got := fromToolchain(bi).String()
	for _, want := range []string{"edgemux v1.4.0\n", "revision 6250c0e4+dirty\n", "committed 2026-12-01T10:00:00Z\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("version lacks %q:\n%s", want, got)
		}
	}
	bi.Main.Version, bi.Settings = "(devel)", bi.Settings[:1]
	if got := fromToolchain(bi).String(); !strings.HasPrefix(got, "edgemux devel\nrevision 6250c0e4\n") {
		t.Errorf("clean devel build:\n%s", got)
	}
	if got := fromToolchain(nil).String(); !strings.HasPrefix(got, "edgemux devel\nrevision unknown\ncommitted unknown\n") {
		t.Errorf("no build info:\n%s", got)
	}
}

// TestVersionLdflags: a release build's stamps win over the toolchain's.
func TestVersionLdflags(t *testing.T) {
	bin := buildBinary(t, "-ldflags", "-X main.version=v9.8.7 -X main.revision=abc123 -X main.buildTime=2026-12-03T17:00:00Z")
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "edgemux v9.8.7\nrevision abc123\nbuilt 2026-12-03T17:00:00Z\n" + runtime.Version() + " linux/" + runtime.GOARCH + "\n"
	if string(out) != want {
		t.Fatalf("version:\n%s\nwant:\n%s", out, want)
	}
}

// TestConfigEnv: EDGEMUX_CONFIG stands in for -c; -c wins.
func TestConfigEnv(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("listen: 127.0.0.1:5020\n"), 0o644)
	os.WriteFile(bad, []byte("sniff:\n  budget: 3\n"), 0o644)
	t.Setenv("EDGEMUX_CONFIG", bad)
	if code, _, errOut := cli(t, "", "check"); code != 1 || !strings.Contains(errOut, "sniff.budget") {
		t.Fatalf("check with EDGEMUX_CONFIG=bad: code %d: %s", code, errOut)
	}
	if code, out, errOut := cli(t, "", "check", "-c", good); code != 0 || out != good+": ok\n" {
		t.Fatalf("check -c good over EDGEMUX_CONFIG=bad: code %d: %s%s", code, out, errOut)
	}
	t.Setenv("EDGEMUX_CONFIG", good)
	if code, out, _ := cli(t, "", "check"); code != 0 || out != good+": ok\n" {
		t.Fatalf("check with EDGEMUX_CONFIG=good: code %d: %s", code, out)
	}
}
