package private

import (
	"testing"
	"unsafe"
)

// TestSessionSize: an idle connection holds its session for life; 64 bytes
// is a size class of its own (anything up to 80 would be rounded to 80).
// The held ACKs are a pointer to a list made at the first one for this.
func TestSessionSize(t *testing.T) {
	if size := unsafe.Sizeof(session{}); size > 64 {
		t.Fatalf("session is %d bytes, want at most 64", size)
	}
}
