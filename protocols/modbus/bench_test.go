package modbus

import (
	"testing"

	"github.com/edgemux/edgemux/route/bus"
)

// benchSession is a session over memConn with the plant map and values.
func benchSession(tb testing.TB) (*session, *memConn) {
	b := bus.New(bus.Options{})
	for topic, v := range map[string]string{"plant/temp": "21.7", "plant/flow": "42", "plant/counter": "70000", "plant/setpoint": "22.5"} {
		mustPublish(tb, b, topic, v)
	}
	c := &memConn{}
	s, _ := New(plantMap, b, nil).Open(c)
	return s.(*session), c
}

// BenchmarkRead is one FC 4 request for two input registers, from bytes
// in to the response written.
func BenchmarkRead(b *testing.B) {
	s, c := benchSession(b)
	req := adu(1, 1, 0x04, 0, 0, 0, 2)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Data(req); err != nil {
			b.Fatal(err)
		}
		c.out = c.out[:0]
	}
}

// BenchmarkWrite is one FC 16 write of a float32 setpoint, published.
func BenchmarkWrite(b *testing.B) {
	s, c := benchSession(b)
	req := adu(1, 1, 0x10, 0, 100, 0, 2, 4, 0x41, 0xB4, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Data(req); err != nil {
			b.Fatal(err)
		}
		c.out = c.out[:0]
	}
}

// TestServeAllocs bounds the allocations of a read (one string per tag
// read from the bus cache: 2) and of a write (the update, its text and
// the bus's copy: 3), as measured when written, with one of slack.
func TestServeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	s, c := benchSession(t)
	for _, tt := range []struct {
		name string
		req  []byte
		most float64
	}{
		{"read two registers", adu(1, 1, 0x04, 0, 0, 0, 2), 3},
		{"write a float32", adu(1, 1, 0x10, 0, 100, 0, 2, 4, 0x41, 0xB4, 0, 0), 4},
	} {
		n := testing.AllocsPerRun(200, func() {
			s.Data(tt.req)
			c.out = c.out[:0]
		})
		if n > tt.most {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, n, tt.most)
		}
	}
}
