package gateway

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols"
)

// dialInHandler stands in for a protocol whose devices speak only when
// spoken to: Probe writes a question, and whatever the peer answers is
// acknowledged. Open (a device that spoke first) greets it.
type dialInHandler struct{}

type dialInSession struct{ c protocols.Conn }

func (dialInHandler) Open(c protocols.Conn) (protocols.Session, error) {
	c.Write([]byte("HELLO\n"))
	return &dialInSession{c}, nil
}

func (dialInHandler) Probe(c protocols.Conn) (protocols.Session, error) {
	if err := c.Write([]byte("PROBE\n")); err != nil {
		return nil, err
	}
	return &dialInSession{c}, nil
}

func (s *dialInSession) Data(in []byte) (int, error) {
	s.c.Write(append([]byte("GOT "), in...))
	return len(in), nil
}

func (s *dialInSession) Closed(error) {}

func probeConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.Sniff.Deadline = 300 * time.Millisecond
	cfg.Sniff.ProbeTimeout = 500 * time.Millisecond
	cfg.Sniff.Probe = "dialin"
	cfg.Pools["dialin"] = config.Pool{Workers: 1, Protocols: []string{"modbus"}, IdleTimeout: time.Minute}
	cfg.Normalize()
	return cfg
}

// TestProbeWakesSilentPeer: a peer silent past the sniff deadline is
// handed to the probe pool, which speaks first; its answer reaches the
// session and the probe window closes.
func TestProbeWakesSilentPeer(t *testing.T) {
	g := startGateway(t, probeConfig(t), Options{Handlers: map[string]protocols.Handler{"modbus": dialInHandler{}}})
	c := dial(t, g)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || line != "PROBE\n" {
		t.Fatalf("first line %q, %v; want the probe", line, err)
	}
	c.Write([]byte("reg=42\n"))
	line, err = r.ReadString('\n')
	if err != nil || line != "GOT reg=42\n" {
		t.Fatalf("answer %q, %v", line, err)
	}
	// Past the probe timeout the device stays: it answered.
	time.Sleep(800 * time.Millisecond)
	c.Write([]byte("again\n"))
	if line, err = r.ReadString('\n'); err != nil || line != "GOT again\n" {
		t.Fatalf("after the probe window: %q, %v", line, err)
	}
}

// TestProbeTimeoutQuarantines: a probed peer that never answers is closed
// at the probe timeout and recorded as a timeout.
func TestProbeTimeoutQuarantines(t *testing.T) {
	g := startGateway(t, probeConfig(t), Options{Handlers: map[string]protocols.Handler{"modbus": dialInHandler{}}})
	c := dial(t, g)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "PROBE\n" {
		t.Fatalf("read %q, %v; want the probe then EOF", b, err)
	}
	eventually(t, "a timeout record", func() bool { return g.Book().Stats().Reasons[protocols.ReasonTimeout] == 1 })
}

// tickHandler's sessions use SetTimer: three ticks, then close.
type tickHandler struct{}

type tickSession struct {
	c protocols.Conn
	n int
}

func (tickHandler) Open(c protocols.Conn) (protocols.Session, error) {
	c.SetTimer(150 * time.Millisecond)
	return &tickSession{c: c}, nil
}

func (s *tickSession) Data(in []byte) (int, error) {
	if strings.Contains(string(in), "cancel") {
		s.c.SetTimer(0)
		s.c.Write([]byte("cancelled\n"))
	}
	return len(in), nil
}

func (s *tickSession) Closed(error) {}

func (s *tickSession) Timer() error {
	s.n++
	s.c.Write([]byte("tick\n"))
	if s.n == 3 {
		return io.EOF
	}
	s.c.SetTimer(100 * time.Millisecond)
	return nil
}

func TestSessionTimers(t *testing.T) {
	cfg := testConfig(t)
	cfg.Pools["modbus"] = config.Pool{Workers: 1, Protocols: []string{"modbus"}}
	cfg.Routes = append([]config.Route{{Match: config.Match{Proto: "modbus"}, Action: "handle"}}, cfg.Routes...)
	cfg.Normalize()
	g := startGateway(t, cfg, Options{Handlers: map[string]protocols.Handler{"modbus": tickHandler{}}})
	modbusRead := []byte{0, 1, 0, 0, 0, 6, 1, 3, 0, 0, 0, 10}

	c := dial(t, g)
	c.Write(modbusRead)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "tick\ntick\ntick\n" {
		t.Fatalf("read %q, %v; want three ticks then close", b, err)
	}

	// A cancelled timer never fires.
	c2 := dial(t, g)
	c2.Write(append(modbusRead, "cancel"...))
	r := bufio.NewReader(c2)
	c2.SetReadDeadline(time.Now().Add(20 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "cancelled\n" {
		t.Fatalf("got %q, %v", line, err)
	}
	c2.SetReadDeadline(time.Now().Add(time.Second))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("a cancelled timer fired: %q", line)
	}
}
