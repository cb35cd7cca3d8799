package gateway

// fdTable maps a worker's connections' fds to what it keeps of each (its
// conns, its placements): a lookup per event, by index, as the registry's
// slots are found.
//
// It is paged, not one slice as long as the registry: every worker kept
// two such slices, 8 bytes per fd each, so a gateway sized for 20,000 fds
// with ten workers held 3.2 MB of pointer slices whatever it served, and
// the garbage collector read all of it every cycle (idle RSS of the
// benchmark gateway 6.8 MB, 4.5 MB with the caps lowered to 100). A page
// of fdPage entries is made the first time the worker gets an fd in its
// range and kept after: memory follows the fds a worker has served, and
// a worker of a pool that serves nobody holds only the page index.
type fdTable[T any] struct {
	pages []*[fdPage]*T
}

// fdPage is how many fds one page covers: 2 KiB of pointers, so the
// lowest fds (which the kernel hands out first) share few pages.
const fdPage = 256

// newFDTable returns a table for fds 0..size-1.
func newFDTable[T any](size int) fdTable[T] {
	return fdTable[T]{pages: make([]*[fdPage]*T, (size+fdPage-1)/fdPage)}
}

// get returns fd's entry, nil if none.
func (t *fdTable[T]) get(fd int) *T {
	p := t.pages[fd/fdPage]
	if p == nil {
		return nil
	}
	return p[fd%fdPage]
}

// set stores v as fd's entry, making its page if need be.
func (t *fdTable[T]) set(fd int, v *T) {
	p := t.pages[fd/fdPage]
	if p == nil {
		if v == nil {
			return
		}
		p = new([fdPage]*T)
		t.pages[fd/fdPage] = p
	}
	p[fd%fdPage] = v
}

// each calls f with every entry in fd order; f may set or clear entries,
// its own included.
func (t *fdTable[T]) each(f func(v *T)) {
	for _, p := range t.pages {
		if p == nil {
			continue
		}
		for _, v := range p {
			if v != nil {
				f(v)
			}
		}
	}
}

// size is how many fds the table covers.
func (t *fdTable[T]) size() int { return len(t.pages) * fdPage }
