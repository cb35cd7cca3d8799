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
// the next's (a shard's sequence and counters are in its data), between
// the trie lock's stripes, and between the last stripe and the fields
// after it. The line is the platform's as golang.org/x/sys/cpu knows it
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
	if gap := unsafe.Offsetof(b.opt) - (unsafe.Offsetof(b.trie) + unsafe.Sizeof(b.trie)); gap < line {
		t.Errorf("%d bytes between the trie lock and the fields after it, want at least %d", gap, line)
	}
}
