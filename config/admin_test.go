package config

import (
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestReadToken(t *testing.T) {
	const good = "3f9a1c0d5e7b2a4c6e8f0a1b3c5d7e9f"
	for _, tt := range []struct {
		name, content, want, problem string
	}{
		{"plain", good, good, ""},
		{"final newline and spaces", "  " + good + "\n\n", good, ""},
		{"base64 with padding", "QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "QWxhZGRpbjpvcGVuIHNlc2FtZQ==", ""},
		{"empty", "\n", "", "empty"},
		{"short", "secret\n", "", "at least 16"},
		{"two lines", good + "\n" + good, "", "one line"},
		{"space inside", "0123456789 abcdef", "", "only letters"},
		{"padding in the middle", "abcdefgh==ijklmnop", "", "only letters"},
		{"too long", strings.Repeat("a", MaxTokenLength+1), "", "over 4096"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadToken(writeFile(t, "token", tt.content))
			if tt.problem == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ReadToken = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrTokenFile) || !strings.Contains(err.Error(), tt.problem) {
				t.Fatalf("ReadToken = %q, %v; want an ErrTokenFile saying %q", got, err, tt.problem)
			}
		})
	}
}

// TestReadTokenRefusesSpecialFiles: a FIFO would block the open and a
// device would never end; neither is opened.
func TestReadTokenRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero", t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
		if _, err := ReadToken(path); !errors.Is(err, ErrTokenFile) {
			t.Errorf("ReadToken(%s) = %v, want ErrTokenFile", path, err)
		}
	}
}

func TestParseAllow(t *testing.T) {
	got, err := ParseAllow([]string{"10.1.2.3/8", "::1/128", "192.168.7.0/24"})
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("192.168.7.0/24")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseAllow = %v, %v; want %v", got, err, want)
	}
	if _, err := ParseAllow([]string{"10.0.0.0/8", "10.0.0.5"}); err == nil || !strings.Contains(err.Error(), "allow[1]") {
		t.Fatalf("a bare address: %v, want an error naming allow[1]", err)
	}
}

// TestValidateAdmin: every admin problem is reported with its path and
// line, token files included, which are read when the file is checked.
func TestValidateAdmin(t *testing.T) {
	short := writeFile(t, "short", "hunter2\n")
	good := writeFile(t, "good", "0123456789abcdef0123456789abcdef\n")
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tt := range []struct {
		name, doc, path string
		line            int
		problem         string
	}{
		{"allow not a prefix", "admin:\n  operator:\n    allow: [10.0.0.0/8, 10.0.0.5]\n", "admin.operator.allow[1]", 3, "CIDR prefix"},
		{"allow garbage", "admin:\n  probe:\n    allow:\n      - 'every host'\n", "admin.probe.allow[0]", 4, `"every host"`},
		{"token file missing", "admin:\n  scrape:\n    token_file: " + missing + "\n", "admin.scrape.token_file", 3, "no such file"},
		{"token too short", "admin:\n  operator:\n    allow: []\n    token_file: " + short + "\n", "admin.operator.token_file", 4, "at least 16"},
		{"token file a directory", "admin:\n  probe:\n    token_file: /tmp\n", "admin.probe.token_file", 3, "not a regular file"},
		{"per ip over total", "admin:\n  max_conns: 4\n", "admin.max_conns_per_ip", 1, "admin.max_conns (4)"},
		{"per ip zero", "admin:\n  max_conns_per_ip: 0\n", "admin.max_conns_per_ip", 2, "between 1 and 10000"},
		{"idle timeout long", "admin:\n  idle_timeout: 1h\n", "admin.idle_timeout", 2, "between 100ms and 5m"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := mustParse(t, tt.doc).Validate()
			for _, fe := range fieldErrors(err) {
				if fe.Path == tt.path {
					if fe.Line != tt.line || !strings.Contains(fe.Problem, tt.problem) {
						t.Errorf("got %q, want line %d and %q", fe, tt.line, tt.problem)
					}
					return
				}
			}
			t.Errorf("no problem at %s in:\n%v", tt.path, err)
		})
	}
	ok := "admin:\n  pprof: true\n  operator:\n    allow: ['10.20.0.0/16', '127.0.0.1/32']\n    token_file: " + good +
		"\n  scrape:\n    allow: []\n    token_file: " + good + "\n"
	if err := mustParse(t, ok).Validate(); err != nil {
		t.Errorf("Validate(%q):\n%v", ok, err)
	}
}

func TestParseAdmin(t *testing.T) {
	c := mustParse(t, "admin:\n  operator:\n    allow: ['10.0.0.0/8']\n  probe:\n    allow: []\n")
	if !slices.Equal(c.Admin.Operator.Allow, []string{"10.0.0.0/8"}) || len(c.Admin.Probe.Allow) != 0 {
		t.Errorf("allow lists replace the defaults: %+v", c.Admin)
	}
	if !slices.Equal(c.Admin.Scrape.Allow, []string{"127.0.0.0/8", "::1/128"}) || c.Admin.MaxConnsPerIP != 8 || c.Admin.PProf {
		t.Errorf("unset keys keep their defaults: %+v", c.Admin)
	}
}
