package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgemux/edgemux/config"
)

const (
	repoRoot = "../../.."
	unitFile = repoRoot + "/examples/systemd/edgemux.service"
)

// unitSettings reads the active (uncommented) Key=Value lines of the unit.
func unitSettings(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set := map[string][]string{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		l := strings.TrimSpace(lines.Text())
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			set[k] = append(set[k], v)
		}
	}
	return set
}

// TestSystemdUnit: the example unit is hardened as docs/CLI.md says, has
// file descriptors for the default max_conns, and passes systemd-analyze
// verify where systemd is installed.
func TestSystemdUnit(t *testing.T) {
	set := unitSettings(t)
	for k, want := range map[string]string{
		"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"ConfigurationDirectory": "edgemux", "ExecReload": "/bin/kill -HUP $MAINPID",
		"CapabilityBoundingSet": "", "AmbientCapabilities": "",
	} {
		if got := set[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	// The gateway's registry needs 2 x max_conns + admin.max_conns + 256
	// fds (gateway.registrySize).
	cfg, err := config.Parse(config.DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	need := 2*cfg.Limits.MaxConns + cfg.Admin.MaxConns + 256
	if n, err := strconv.Atoi(strings.Join(set["LimitNOFILE"], "")); err != nil || n < need {
		t.Errorf("LimitNOFILE=%v, want at least %d for the default limits", set["LimitNOFILE"], need)
	}
	verifyUnit(t)
}

// verifyUnit runs systemd-analyze verify on the unit. Verify checks that
// ExecStart's binary exists, so the copy it checks runs a freshly built
// edgemux instead of /usr/local/bin/edgemux; nothing else changes. Verify
// exits 0 on an unknown key or a bad value, so any output fails.
func verifyUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian: apt-get install systemd); the unit is not verified")
	}
	bin := buildBinary(t)
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "edgemux.service")
	os.WriteFile(copied, bytes.ReplaceAll(unit, []byte("/usr/local/bin/edgemux"), []byte(bin)), 0o644)
	out, err := exec.Command(analyze, "verify", copied).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestRelease runs make release for amd64 (and 32-bit ARM when qemu-arm
// can run it): static binaries whose version is the one stamped, and
// SHA256SUMS that match them.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds the binary")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	arches := map[string]string{"amd64": ""} // arch -> the emulator that runs it
	if q, err := exec.LookPath("qemu-arm"); err == nil {
		arches["arm"] = q
	}
	names := make([]string, 0, len(arches))
	for a := range arches {
		names = append(names, a)
	}
	dist := t.TempDir()
	cmd := exec.Command("make", "-s", "release", "DIST="+dist, "RELEASE_ARCHES="+strings.Join(names, " "),
		"VERSION=v0.0.0-test", "BUILD_TIME=2026-12-03T00:00:00Z")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	sums := exec.Command("sha256sum", "-c", "SHA256SUMS")
	sums.Dir = dist
	if out, err := sums.CombinedOutput(); err != nil || strings.Count(string(out), ": OK") != len(arches) {
		t.Fatalf("sha256sum -c: %v\n%s", err, out)
	}
	for arch, emulator := range arches {
		bin := filepath.Join(dist, "edgemux-linux-"+arch)
		checkStatic(t, bin)
		args := []string{bin, "version"}
		if emulator != "" {
			args = append([]string{emulator}, args...)
		}
		out, err := exec.Command(args[0], args[1:]...).Output()
		if err != nil {
			t.Fatalf("%s version: %v", arch, err)
		}
		want := regexp.MustCompile(`^edgemux v0.0.0-test\nrevision [0-9a-f]{40}(\+dirty)?\nbuilt 2026-12-03T00:00:00Z\ngo\S+ linux/` + arch + "\n$")
		if !want.Match(out) {
			t.Errorf("%s version:\n%s", arch, out)
		}
	}
}

// checkStatic fails if bin asks for a dynamic loader (a PT_INTERP header).
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", bin)
		}
	}
}
