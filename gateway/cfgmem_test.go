package gateway

import (
	"testing"

	"github.com/edgemux/edgemux/config"
)

// TestNewDropsLineIndex: the configuration's line index (for Validate's
// errors) is not kept for the gateway's life: with 15,000 polled tags it
// was the largest thing on the heap.
func TestNewDropsLineIndex(t *testing.T) {
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nlog: {level: warn}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Lines) == 0 {
		t.Fatal("Parse filled no line index")
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.cfg.Lines != nil {
		t.Fatalf("the gateway keeps the line index (%d paths)", len(g.cfg.Lines))
	}
}
