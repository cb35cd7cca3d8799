package rudp

import (
	"math/bits"
	"sync/atomic"
)

// Budget is the memory that sessions may hold in message buffers, shared
// by the endpoints of every worker of a handler (so one busy worker may
// use what idle ones do not): safe for concurrent use, one atomic add per
// buffer taken or given back.
type Budget struct {
	used  atomic.Int64
	limit int64
}

// NewBudget makes a budget of limit bytes.
func NewBudget(limit int) *Budget { return &Budget{limit: int64(limit)} }

// InUse is how many bytes the sessions hold now.
func (b *Budget) InUse() int { return int(b.used.Load()) }

func (b *Budget) take(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *Budget) give(n int) { b.used.Add(-int64(n)) }

// bufPool recycles message buffers in power-of-two size classes from 64
// bytes up, so a steady stream allocates nothing and a 64-byte message
// does not hold a 1,200-byte buffer. Every buffer handed out is charged
// to the budget by its capacity until it is put back.
type bufPool struct {
	free   [bufClasses][][]byte
	budget *Budget
	held   int // bytes this pool's buffers hold (of the budget)
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
	p.held += size
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
	p.held -= cap(b)
	if len(p.free[c]) < bufMaxFree {
		p.free[c] = append(p.free[c], b[:0])
	}
}
