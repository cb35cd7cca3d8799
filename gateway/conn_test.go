package gateway

import (
	"testing"
	"unsafe"
)

// TestConnStaysSmall: every idle connection carries one conn; keep it in
// the 96-byte size class (see the conn doc comment).
func TestConnStaysSmall(t *testing.T) {
	if size := unsafe.Sizeof(conn{}); size > 96 {
		t.Fatalf("sizeof(conn) = %d, want <= 96", size)
	}
}
