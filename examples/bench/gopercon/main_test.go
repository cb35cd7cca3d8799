package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

// hello is a HELLO frame for a fixture id; a bad id is a bug in the test.
func hello(id string) []byte {
	b, err := private.AppendHello(nil, private.Hello{DeviceID: []byte(id)})
	if err != nil {
		panic("fixture: " + err.Error())
	}
	return b
}

// answerTable seeds FuzzAnswer.
var answerTable = []struct {
	name string
	in   []byte
	acks int
	used int
	err  error
}{
	{"empty", nil, 0, 0, nil},
	{"hello", hello("d1"), 1, 19, nil},
	{"two hellos", append(hello("d1"), hello("d2")...), 2, 38, nil},
	{"partial", hello("d1")[:10], 0, 0, nil},
	{"ping ignored", private.AppendFrame(nil, private.TypePing, nil), 0, 12, nil},
	{"garbage", []byte("GET /"), 0, 0, errFrame},
}

func TestAnswer(t *testing.T) {
	ack := private.AppendAck(nil, private.Ack{})
	for _, tt := range answerTable {
		out, used, err := answer(nil, tt.in)
		if used != tt.used || !errors.Is(err, tt.err) || !bytes.Equal(out, bytes.Repeat(ack, tt.acks)) {
			t.Errorf("%s: out %x used %d err %v", tt.name, out, used, err)
		}
	}
}

func FuzzAnswer(f *testing.F) {
	for _, tt := range answerTable {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, used, _ := answer(nil, in)
		if used < 0 || used > len(in) || len(out)%17 != 0 {
			t.Fatalf("used %d of %d, out %d bytes", used, len(in), len(out))
		}
	})
}

func TestServerAnswersHelloAndCounts(t *testing.T) {
	s, err := listen("127.0.0.1:0", "127.0.0.1:0", 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(hello("dev")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 17)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	// SPEC.md section 7: the ACK for a HELLO.
	want := []byte{0xe3, 0x4d, 0x01, 0x07, 0, 0, 0, 0x05, 0x50, 0x5b, 0x5f, 0x22, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("ack % x, want % x", got, want)
	}
	resp, err := http.Get("http://" + s.mln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{"gopercon_connections 1\n", "go_memstats_heap_inuse_bytes ", "process_resident_memory_bytes "} {
		if !strings.Contains(string(body), series) {
			t.Errorf("metrics lack %q:\n%s", series, body)
		}
	}
}
