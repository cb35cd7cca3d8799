package gateway

// fdTable maps a worker's connections' fds to what it keeps of each: its
// conn and, once placement has learned something of it, its placement. A
// lookup per event, by index, as the registry's slots are found.
//
// Both live in one entry: an event reads the conn when it is taken and the
// placement when it is learned from (placement.go), and with two tables
// that was two cache lines per event. With 1,000 connections taking turns,
// a connection's lines are out of the cache by its next request, so each
// one read is a stall of its own (docs/BENCHMARKS.md, round 11).
//
// It is paged, not one slice as long as the registry: a gateway sized for
// 20,000 fds with ten workers would hold 3.2 MB of entries whatever it
// served, and the garbage collector would read all of it every cycle. A
// page of fdPage entries is made the first time the worker gets an fd in
// its range and kept after: memory follows the fds a worker has served,
// and a worker of a pool that serves nobody holds only the page index.
type fdTable struct {
	pages []*[fdPage]fdEntry
}

// fdEntry is what a worker keeps of one fd.
type fdEntry struct {
	conn  *conn
	place *placement // nil until placement made one (placement.go)
}

// fdPage is how many fds one page covers: 4 KiB of entries, so the
// lowest fds (which the kernel hands out first) share few pages.
const fdPage = 256

// newFDTable returns a table for fds 0..size-1.
func newFDTable(size int) fdTable {
	return fdTable{pages: make([]*[fdPage]fdEntry, (size+fdPage-1)/fdPage)}
}

// entry returns fd's entry, nil if its page was never made; with create,
// it makes the page.
func (t *fdTable) entry(fd int, create bool) *fdEntry {
	p := t.pages[fd/fdPage]
	if p == nil {
		if !create {
			return nil
		}
		p = new([fdPage]fdEntry)
		t.pages[fd/fdPage] = p
	}
	return &p[fd%fdPage]
}

// conn returns fd's conn, nil if none.
func (t *fdTable) conn(fd int) *conn {
	if e := t.entry(fd, false); e != nil {
		return e.conn
	}
	return nil
}

// place returns fd's placement, nil if none.
func (t *fdTable) place(fd int) *placement {
	if e := t.entry(fd, false); e != nil {
		return e.place
	}
	return nil
}

// setConn stores c as fd's conn (nil: none), making its page if need be.
func (t *fdTable) setConn(fd int, c *conn) {
	if e := t.entry(fd, c != nil); e != nil {
		e.conn = c
	}
}

// setPlace stores pl as fd's placement (nil: none), as setConn.
func (t *fdTable) setPlace(fd int, pl *placement) {
	if e := t.entry(fd, pl != nil); e != nil {
		e.place = pl
	}
}

// each calls f with every conn in fd order; f may set or clear entries,
// its own included.
func (t *fdTable) each(f func(c *conn)) {
	for _, p := range t.pages {
		if p == nil {
			continue
		}
		for i := range p {
			if c := p[i].conn; c != nil {
				f(c)
			}
		}
	}
}

// size is how many fds the table covers.
func (t *fdTable) size() int { return len(t.pages) * fdPage }
