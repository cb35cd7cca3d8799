package rudp

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsValidate(t *testing.T) {
	c := Config{}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.MaxDatagram != DefaultMaxDatagram || c.IdleTimeout != DefaultIdleTimeout || c.Window != DefaultWindow {
		t.Fatalf("%+v", c)
	}
}

// TestConfigValidate: every inconsistency is reported, all at once.
func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"datagram too small", Config{MaxDatagram: 100}, []string{"max_datagram"}},
		{"datagram too large", Config{MaxDatagram: 70000}, []string{"max_datagram"}},
		{"window", Config{Window: 2}, []string{"window"}},
		{"message past half the window", Config{Window: 8, MaxMessage: 1 << 20, SendQueue: 1 << 21}, []string{"max_message"}},
		{"queue under a message", Config{SendQueue: 1000}, []string{"send_queue"}},
		{"keepalive not below idle", Config{KeepAlive: 2 * time.Minute}, []string{"keepalive"}},
		{"rto bounds", Config{MinRTO: 3 * time.Second}, []string{"min_rto"}},
		{"short key", Config{Keys: Keys{"d": make([]byte, 16)}}, []string{"key is 16 bytes"}},
		{"empty device", Config{Keys: Keys{"": make([]byte, 32)}}, []string{"device id"}},
		{"psk without device", Config{PSK: make([]byte, 32)}, []string{"go together"}},
		{"two at once", Config{Window: 2, KeepAlive: time.Hour}, []string{"window", "keepalive"}},
	}
	for _, tc := range cases {
		err := tc.cfg.WithDefaults().Validate()
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
	if _, err := NewEndpoint(Config{Window: 1}, EndpointOptions{}, simStart); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewEndpoint accepts a bad config: %v", err)
	}
	if _, err := NewEndpoint(Config{}, EndpointOptions{Worker: 3, Workers: 3}, simStart); !errors.Is(err, ErrConfig) {
		t.Fatalf("worker 3 of 3 accepted: %v", err)
	}
	if _, err := NewClient(Config{MaxDatagram: 10}, nil, simStart); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewClient accepts a bad config: %v", err)
	}
}
