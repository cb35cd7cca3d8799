package rudp

import "math/bits"

// budget is the memory an Endpoint (or a Client) lets its sessions hold in
// message buffers. A worker owns it: no locks.
type budget struct {
	used, limit int
}

func (b *budget) take(n int) bool {
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int) { b.used -= n }

// bufPool recycles message buffers in power-of-two size classes from 64
// bytes up, so a steady stream allocates nothing and a 64-byte message
// does not hold a 1,200-byte buffer. Every buffer handed out is charged
// to the budget by its capacity until it is put back.
type bufPool struct {
	free   [bufClasses][][]byte
	budget *budget
}

const (
	bufMinShift = 6 // 64 bytes
	bufClasses  = 11
	bufMaxFree  = 1024 // per class; more go to the garbage collector
)

// bufClass is the size class that holds n bytes.
func bufClass(n int) int {
	if n <= 1<<bufMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - bufMinShift
}

// get returns a buffer of length n, or false when the budget is spent.
func (p *bufPool) get(n int) ([]byte, bool) {
	c := bufClass(n)
	if c >= bufClasses {
		return nil, false
	}
	size := 1 << (c + bufMinShift)
	if !p.budget.take(size) {
		return nil, false
	}
	if k := len(p.free[c]); k > 0 {
		b := p.free[c][k-1]
		p.free[c][k-1] = nil
		p.free[c] = p.free[c][:k-1]
		return b[:n], true
	}
	return make([]byte, n, size), true
}

// put returns a buffer from get.
func (p *bufPool) put(b []byte) {
	if b == nil {
		return
	}
	c := bufClass(cap(b))
	p.budget.give(cap(b))
	if len(p.free[c]) < bufMaxFree {
		p.free[c] = append(p.free[c], b[:0])
	}
}
