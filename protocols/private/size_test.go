package private

import (
	"testing"
	"unsafe"
)

// TestSessionSize: an idle connection holds its session for life; 80 bytes
// is a size class of its own (88 would be rounded up to 96).
func TestSessionSize(t *testing.T) {
	if size := unsafe.Sizeof(session{}); size > 80 {
		t.Fatalf("session is %d bytes, want at most 80", size)
	}
}
