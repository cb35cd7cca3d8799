package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/edgemux/edgemux/gateway/gatewaytest"
	"github.com/edgemux/edgemux/protocols/private"
)

// startGateway runs an in-process gateway on an ephemeral loopback port
// until the test ends and returns its address.
func startGateway(t *testing.T) string {
	t.Helper()
	return gatewaytest.Start(t, gatewaytest.Defaults(t)).Addr().String()
}

// field returns the integer value of key=... in line, or -1.
func field(t *testing.T, line, key string) int {
	t.Helper()
	m := regexp.MustCompile(`\b` + key + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %q", key, line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func resultLine(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^result .*$`).FindString(out)
	if m == "" {
		t.Fatalf("no result line in:\n%s", out)
	}
	return m
}

func TestIdleMode(t *testing.T) {
	addr := startGateway(t)
	var out, errOut bytes.Buffer
	code := run([]string{"-addr", addr, "-mode", "idle", "-conns", "40", "-sources", "4", "-hold", "100ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	line := resultLine(t, out.String())
	if field(t, line, "open") != 40 || field(t, line, "alive") != 40 || field(t, line, "failed") != 0 {
		t.Fatalf("want 40 open and alive: %s", line)
	}
}

func TestPubMode(t *testing.T) {
	addr := startGateway(t)
	var out, errOut bytes.Buffer
	code := run([]string{"-addr", addr, "-mode", "pub", "-conns", "20", "-subs", "2", "-sources", "3",
		"-rate", "2000", "-duration", "500ms", "-drain", "500ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	line := resultLine(t, out.String())
	pub, got := field(t, line, "published"), field(t, line, "delivered_after_drain")
	if pub == 0 || got == 0 || got > pub {
		t.Fatalf("published %d, delivered %d: %s", pub, got, line)
	}
	if field(t, line, "write_errors") != 0 || field(t, line, "sub_errors") != 0 {
		t.Fatalf("errors: %s", line)
	}
}

func TestBadFlags(t *testing.T) {
	tests := [][]string{
		{"-mode", "storm"},
		{"-conns", "0"},
		{"-sources", "251"},
		{"-size", "70000"},
		{"-duration", "0s"},
		{"-nosuchflag"},
	}
	for _, args := range tests {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestSourceAddrStaysOnLoopback(t *testing.T) {
	for i := range 1000 {
		a := sourceAddr(i, maxSources)
		if !a.IP.IsLoopback() || a.IP.Equal([]byte{127, 0, 0, 1}) {
			t.Fatalf("source %d: %v", i, a.IP)
		}
	}
}

// countFramesTable seeds FuzzCountFrames.
var countFramesTable = []struct {
	name string
	in   []byte
	want frameCount
	used int
	err  error
}{
	{"empty", nil, frameCount{}, 0, nil},
	{"ack", private.AppendAck(nil, private.Ack{}), frameCount{acks: 1}, ackFrameLen, nil},
	{"two pubs and a partial", func() []byte {
		b, _ := private.AppendPub(nil, private.Pub{Topic: []byte("a/b"), Data: []byte("x")})
		n := len(b)
		b = append(b, b...)
		return append(b, b[:n-1]...)
	}(), frameCount{pubs: 2}, 2 * 32, nil},
	{"error frame", private.AppendError(nil, private.CodeBadTopic, "bad"), frameCount{errors: 1}, 19, nil},
	{"garbage", []byte("GET / HTTP/1.1"), frameCount{}, 0, private.ErrBadMagic},
}

func TestCountFrames(t *testing.T) {
	for _, tt := range countFramesTable {
		fc, used, err := countFrames(tt.in, 1024)
		if fc != tt.want || used != tt.used || !errors.Is(err, tt.err) {
			t.Errorf("%s: got %+v used %d err %v; want %+v used %d err %v", tt.name, fc, used, err, tt.want, tt.used, tt.err)
		}
	}
}

func FuzzCountFrames(f *testing.F) {
	for _, tt := range countFramesTable {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fc, used, _ := countFrames(in, 1024)
		if used < 0 || used > len(in) {
			t.Fatalf("used %d of %d", used, len(in))
		}
		if frames := fc.pubs + fc.acks + fc.errors; frames*private.HeaderLen > used {
			t.Fatalf("%d frames in %d bytes", frames, used)
		}
	})
}

// The ACK check must insist on the msg id and the status.
func TestCheckAck(t *testing.T) {
	ok := private.AppendAck(nil, private.Ack{MsgID: 1})
	if err := checkAck(ok, 1); err != nil {
		t.Fatal(err)
	}
	if err := checkAck(ok, 2); !errors.Is(err, errRefused) {
		t.Fatalf("wrong id: %v", err)
	}
	bad := private.AppendAck(nil, private.Ack{MsgID: 1, Status: private.CodeBadTopic})
	if err := checkAck(bad, 1); !errors.Is(err, errRefused) {
		t.Fatalf("bad status: %v", err)
	}
	pong, _ := private.AppendPong(nil, []byte{1, 2, 3, 4, 5})
	if err := checkAck(pong, 0); !errors.Is(err, errNoAck) {
		t.Fatalf("pong: %v", err)
	}
}

// hold must end on ctx as well as on its timer.
func TestHoldEndsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d := hold(ctx, time.Hour); d >= time.Hour {
		t.Fatalf("held %v after cancel", d)
	}
}

// Partial non-blocking writes must never split the stream into anything
// but whole frames plus the tail of the one in progress.
func TestPubConnKeepsFramesWhole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer s.Close()
		b, _ := io.ReadAll(s)
		received <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPubConn(c, []byte("a/b"), make([]byte, 1000), 7)
	if err != nil {
		t.Fatal(err)
	}
	frames := 0
	for range 5000 {
		n, _, err := p.write()
		if err != nil {
			t.Fatal(err)
		}
		frames += n
	}
	c.Close()
	b := <-received
	fc, used, err := countFrames(b, 4096)
	if err != nil || fc.pubs != frames || used != frames*p.frameLen || len(b)-used != p.pos {
		t.Fatalf("sent %d frames + %d bytes; got %d frames, %d of %d bytes used, err %v",
			frames, p.pos, fc.pubs, used, len(b), err)
	}
}
