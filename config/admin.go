package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"time"
)

// Admin serves health, metrics, the registry view, the API and the
// dashboard over plain HTTP on the shared port. Who may use which
// endpoint is said by three access groups; every request must come from
// an address in its group's allow list and, when the group has a token
// file, carry that token.
type Admin struct {
	Enabled       bool          `yaml:"enabled"`
	MaxConns      int           `yaml:"max_conns"`        // admin HTTP connections at once, from all sources
	MaxConnsPerIP int           `yaml:"max_conns_per_ip"` // the same, from one source address
	IdleTimeout   time.Duration `yaml:"idle_timeout"`     // a kept-alive connection with no request is closed after this long
	PProf         bool          `yaml:"pprof"`            // serve Go's profiler under /debug/pprof/ (operator group)
	StageSample   int           `yaml:"stage_sample"`     // time one event in this many through the seven stages (edgemux_stage_seconds); 0 = off
	Probe         AccessGroup   `yaml:"probe"`            // GET /healthz
	Scrape        AccessGroup   `yaml:"scrape"`           // GET /metrics
	Operator      AccessGroup   `yaml:"operator"`         // everything else: /api/, /debug/, the dashboard, $SYS topics on the WebSocket
}

// AccessGroup says who may use a group of admin endpoints.
type AccessGroup struct {
	Allow     []string `yaml:"allow"`      // source CIDR prefixes; [] = nobody
	TokenFile string   `yaml:"token_file"` // file holding the bearer token; "" = no token asked
}

// Groups lists the access groups by name, in a fixed order.
func (a Admin) Groups() []NamedGroup {
	return []NamedGroup{{"probe", a.Probe}, {"scrape", a.Scrape}, {"operator", a.Operator}}
}

// NamedGroup is an access group with its key under admin.
type NamedGroup struct {
	Name string
	AccessGroup
}

// Token limits: a token is a secret an integrator generates (`openssl rand
// -hex 32`), so anything short is a password typed by hand and anything
// long is the wrong file.
const (
	MinTokenLength = 16
	MaxTokenLength = 4096
	maxAllow       = 256 // entries in one allow list
)

// ErrTokenFile is what ReadToken's errors wrap, with the file's name and
// the reason.
var ErrTokenFile = errors.New("config: token file unusable")

// ReadToken reads a bearer token file: one token of MinTokenLength to
// MaxTokenLength characters of RFC 7235's token68 alphabet (letters,
// digits and -._~+/, then any '='), surrounding whitespace and a final
// newline ignored. Only a regular file is opened, so a mistyped path to a
// FIFO or a device cannot hang or flood the reader.
func ReadToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrTokenFile, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTokenLength+64))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrTokenFile, path, err)
	}
	tok := bytes.TrimSpace(data)
	if problem := tokenProblem(tok); problem != "" {
		return "", fmt.Errorf("%w: %s: %s", ErrTokenFile, path, problem)
	}
	return string(tok), nil
}

// tokenProblem says what is wrong with a token, or "".
func tokenProblem(tok []byte) string {
	switch n := len(tok); {
	case n == 0:
		return "the file is empty"
	case n < MinTokenLength:
		return fmt.Sprintf("the token has %d characters, at least %d are needed (generate one: openssl rand -hex 32)", n, MinTokenLength)
	case n > MaxTokenLength:
		return fmt.Sprintf("the token is over %d characters", MaxTokenLength)
	}
	pad := false
	for _, c := range tok {
		switch {
		case c == '=':
			pad = true
		case pad || !token68Byte(c):
			return "the token may hold only letters, digits and -._~+/ (then '=' padding), on one line"
		}
	}
	return ""
}

func token68Byte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}

// ParseAllow turns an allow list into prefixes, masked ("10.1.2.3/8" is
// 10.0.0.0/8). A bare address is refused: writing the prefix length says
// whether one host or a network is meant.
func ParseAllow(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("allow[%d]: %q is not a CIDR prefix", i, s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// checkAdmin checks the admin section's words: its numbers are in
// intRules and durationRules.
func (v *validator) checkAdmin() {
	a := v.c.Admin
	if a.MaxConnsPerIP > a.MaxConns {
		v.fail("admin.max_conns_per_ip", "must not exceed admin.max_conns (%d)", a.MaxConns)
	}
	for _, g := range a.Groups() {
		v.checkGroup("admin."+g.Name, g.AccessGroup)
	}
}

func (v *validator) checkGroup(path string, g AccessGroup) {
	if n := len(g.Allow); n > maxAllow {
		v.fail(path+".allow", "at most %d prefixes, not %d", maxAllow, n)
	}
	for i, s := range g.Allow[:min(len(g.Allow), maxAllow)] {
		if _, err := netip.ParsePrefix(s); err != nil {
			v.fail(path+".allow["+strconv.Itoa(i)+"]",
				"must be a CIDR prefix such as 10.0.0.0/8 (one host: 10.0.0.5/32), not %q", s)
		}
	}
	if g.TokenFile != "" {
		// Checked when the file is checked, so `edgemux check` finds an
		// unreadable token before a start or a reload does.
		if _, err := ReadToken(g.TokenFile); err != nil {
			v.fail(path+".token_file", "%v", err)
		}
	}
}
