package bus

import (
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// TestLayoutKeepsWritersApart pins the Bus layout that lets workers on
// several cores publish without sharing cache lines (the Bus doc). An
// allocation is not aligned to a line, so what keeps two written fields
// off one line is a full line between them: between one shard's data and
// the next's, between the trie lock's stripes, and on both sides of the
// sequence. The line is the platform's as golang.org/x/sys/cpu knows it
// (64 bytes on amd64 and arm64, 32 on arm).
func TestLayoutKeepsWritersApart(t *testing.T) {
	line := unsafe.Sizeof(cpu.CacheLinePad{})
	var b Bus
	if gap := unsafe.Sizeof(shard{}) - unsafe.Sizeof(shardData{}); gap < line {
		t.Errorf("%d bytes between shards, want at least %d", gap, line)
	}
	if gap := unsafe.Sizeof(b.trie.stripes[0]) - unsafe.Sizeof(sync.RWMutex{}); gap < line {
		t.Errorf("%d bytes between the trie lock's stripes, want at least %d", gap, line)
	}
	before := unsafe.Offsetof(b.seq) - (unsafe.Offsetof(b.trie) + unsafe.Sizeof(b.trie))
	after := unsafe.Offsetof(b.opt) - (unsafe.Offsetof(b.seq) + unsafe.Sizeof(b.seq))
	if before < line || after < line {
		t.Errorf("%d bytes before seq and %d after, want at least %d on each side", before, after, line)
	}
}
