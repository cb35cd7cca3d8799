package gorillasrv

import (
	"errors"
	"testing"
	"time"
)

func TestNewConfig(t *testing.T) {
	cases := []struct {
		writer string
		err    error
	}{
		{"", nil},
		{WriterGoroutine, nil},
		{WriterMutex, nil},
		{"channel", ErrConfig},
	}
	for _, tc := range cases {
		srv, err := New(Config{Writer: tc.writer})
		if !errors.Is(err, tc.err) {
			t.Errorf("writer %q: %v, want %v", tc.writer, err, tc.err)
		}
		if err == nil && (srv.cfg.SendQueue != 256 || srv.cfg.PingPeriod != 30*time.Second || srv.Subscriptions() != 0) {
			t.Errorf("writer %q: defaults %+v", tc.writer, srv.cfg)
		}
	}
}
