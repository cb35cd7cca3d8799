package main

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/gateway"
	"github.com/edgemux/edgemux/gateway/gatewaytest"
	"github.com/edgemux/edgemux/route/routetest"
)

// startGateway runs a gateway with the built-in defaults on a free
// loopback port until the test ends; policy, if given, is its
// dispatch.policy.
func startGateway(t *testing.T, policy ...string) *gateway.Gateway {
	t.Helper()
	cfg := gatewaytest.Defaults(t)
	if len(policy) > 0 {
		cfg.Dispatch.Policy = policy[0]
	}
	return gatewaytest.Start(t, cfg)
}

// syncBuffer is a buffer a running command writes while the test reads it.
type syncBuffer = gatewaytest.Buffer

// cli runs one edgemux command line in-process, as main does.
func cli(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = runWith(args, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut})
	return code, out.String(), errOut.String()
}

// eventually polls cond until it holds; the limit is a hang guard.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	routetest.Eventually(t, what, cond)
}

// TestClientPubGet runs under every dispatch policy: get relies on the
// worker delivering a replay before it reads the next request, whichever
// goroutine runs the handler.
func TestClientPubGet(t *testing.T) {
	for _, policy := range []string{"entropy", "roundrobin", "inline"} {
		t.Run(policy, func(t *testing.T) { testPubGet(t, startGateway(t, policy)) })
	}
}

func testPubGet(t *testing.T, g *gateway.Gateway) {
	s := g.Addr().String()
	// No value yet: an error in the client's words, exit 1, nothing on stdout.
	code, out, errOut := cli(t, "", "get", "-s", s, "-t", "plant/line1/temp")
	if code != exitRefused || out != "" || !strings.Contains(errOut, "no value") {
		t.Fatalf("get before any pub: code %d out %q err %q", code, out, errOut)
	}
	if code, _, errOut := cli(t, "", "pub", "-s", s, "-t", "plant/line1/temp", "-m", "21.5"); code != exitOK {
		t.Fatalf("pub: code %d: %s", code, errOut)
	}
	if code, out, errOut := cli(t, "", "get", "-s", s, "-t", "plant/line1/temp"); code != exitOK || out != "21.5\n" {
		t.Fatalf("get: code %d out %q err %q", code, out, errOut)
	}
	// Lines from stdin, each acknowledged: the last one is the value.
	if code, _, errOut := cli(t, "20.1\n20.2\n20.3\n", "pub", "-s", s, "-t", "plant/line1/temp", "-stdin"); code != exitOK {
		t.Fatalf("pub -stdin: code %d: %s", code, errOut)
	}
	code, out, errOut = cli(t, "", "get", "-s", s, "-t", "plant/line1/temp", "-json")
	var m jsonMessage
	if code != exitOK || json.Unmarshal([]byte(out), &m) != nil {
		t.Fatalf("get -json: code %d out %q err %q", code, out, errOut)
	}
	if m.Topic != "plant/line1/temp" || m.Value != "20.3" || m.Source != "private" || !m.Retained {
		t.Fatalf("get -json = %+v", m)
	}
	if _, err := time.Parse(time.RFC3339Nano, m.Time); err != nil {
		t.Fatalf("get -json time: %v", err)
	}
}

func TestClientSub(t *testing.T) {
	g := startGateway(t)
	s := g.Addr().String()
	type result struct {
		code        int
		out, errOut string
	}
	for _, asJSON := range []bool{false, true} {
		root := map[bool]string{false: "plant", true: "farm"}[asJSON] // a tree per round
		eventually(t, "the last round's subscriber to leave", func() bool { return g.Bus().Stats().Subscribers == 0 })
		if code, _, errOut := cli(t, "", "pub", "-s", s, "-t", root+"/line1/temp", "-m", "21.5"); code != exitOK {
			t.Fatalf("pub: code %d: %s", code, errOut)
		}
		args := []string{"sub", "-s", s, "-t", root + "/#", "-C", "2", "-W", "60s"}
		if asJSON {
			args = append(args, "-json")
		}
		done := make(chan result, 1)
		go func() {
			code, out, errOut := cli(t, "", args...)
			done <- result{code, out, errOut}
		}()
		// The retained value comes first; the live one once sub holds
		// its filter (the bus then has its subscriber).
		eventually(t, "the subscriber", func() bool {
			select {
			case r := <-done:
				t.Fatalf("sub %v ended early: code %d out %q err %q", args, r.code, r.out, r.errOut)
			default:
			}
			return g.Bus().Stats().Subscribers > 0
		})
		if code, _, errOut := cli(t, "", "pub", "-s", s, "-t", root+"/line2/state", "-m", "running hot"); code != exitOK {
			t.Fatalf("pub: code %d: %s", code, errOut)
		}
		r := <-done
		if r.code != exitOK {
			t.Fatalf("sub %v: code %d: %s", args, r.code, r.errOut)
		}
		lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("sub printed %d lines, want 2:\n%s", len(lines), r.out)
		}
		if asJSON {
			var a, b jsonMessage
			if json.Unmarshal([]byte(lines[0]), &a) != nil || json.Unmarshal([]byte(lines[1]), &b) != nil {
				t.Fatalf("not JSON lines:\n%s", r.out)
			}
			if a.Topic != "farm/line1/temp" || a.Value != "21.5" || !a.Retained || b.Value != "running hot" || b.Retained || b.Source != "private" {
				t.Fatalf("sub -json: %+v %+v", a, b)
			}
			continue
		}
		// topic value source time; a value with a space is quoted.
		checkLine(t, lines[0], "plant/line1/temp", "21.5")
		checkLine(t, lines[1], "plant/line2/state", `"running hot"`)
	}
}

// checkLine checks a line of sub's text output: topic value source time,
// the value Go-quoted when it holds a space.
func checkLine(t *testing.T, line, topic, value string) {
	t.Helper()
	rest, ok := strings.CutPrefix(line, topic+" ")
	if !ok {
		t.Fatalf("line %q does not start with %s", line, topic)
	}
	v := strings.Fields(rest)[0]
	if strings.HasPrefix(rest, `"`) {
		var err error
		if v, err = strconv.QuotedPrefix(rest); err != nil {
			t.Fatalf("line %q: value: %v", line, err)
		}
	}
	f := strings.Fields(strings.TrimPrefix(rest, v))
	if v != value || len(f) != 2 || f[0] != "private" {
		t.Fatalf("line %q, want %s %s private TIME", line, topic, value)
	}
	if _, err := time.Parse(time.RFC3339Nano, f[1]); err != nil {
		t.Fatalf("line %q: time: %v", line, err)
	}
}

// TestClientExitCodes: what a script can tell apart.
func TestClientExitCodes(t *testing.T) {
	g := startGateway(t)
	s := g.Addr().String()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := l.Addr().String()
	l.Close()
	for _, c := range []struct {
		args []string
		want int
		says string
	}{
		{[]string{"pub", "-s", s, "-t", "a/b"}, exitUsage, "-m VALUE"},
		{[]string{"pub", "-s", s, "-m", "1"}, exitUsage, "-t is required"},
		{[]string{"pub", "-s", s, "-t", "a/+", "-m", "1"}, exitUsage, "not a filter"},
		{[]string{"get", "-s", s, "-t", "a/#"}, exitUsage, "not a filter"},
		{[]string{"sub", "-s", s}, exitUsage, "-t is required"},
		{[]string{"sub", "-s", s, "-t", "a", "extra"}, exitUsage, "unexpected argument"},
		{[]string{"pub", "-s", s, "-bogus"}, exitUsage, "not defined"},
		{[]string{"pub", "-s", nobody, "-t", "a/b", "-m", "1"}, exitNoServer, "cannot connect"},
		{[]string{"get", "-s", nobody, "-t", "a/b"}, exitNoServer, "cannot connect"},
		{[]string{"pub", "-s", s, "-t", "$SYS/x", "-m", "1"}, exitRefused, "reserved"},
		{[]string{"pub", "-s", s, "-t", strings.Repeat("x", 300), "-m", "1"}, exitRefused, "topic too long"},
		{[]string{"sub", "-s", s, "-t", "a/#/b"}, exitRefused, "bad filter"},
		{[]string{"get", "-s", s, "-t", "never/published"}, exitRefused, "no value"},
		{[]string{"sub", "-s", s, "-t", "quiet/#", "-C", "1", "-W", "100ms"}, exitTimeout, "0 of 1 messages"},
	} {
		code, _, errOut := cli(t, "", c.args...)
		if code != c.want || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: code %d, want %d; stderr %q, want it to say %q", c.args, code, c.want, errOut, c.says)
		}
	}
}
