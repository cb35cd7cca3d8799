package websocket

import (
	"strconv"
)

// Deliveries. A session takes messages from its bus subscriber only while
// the connection's output is empty (the socket takes what it is given),
// one bounded batch per round, staged and written in one piece. A burst,
// or the replay of "#" over the whole cache, therefore waits in the bus
// (a queue bounded in bytes; a replay read as it goes) instead of in the
// output buffer, where it would pass high_water and close the connection
// as a slow consumer; publishers never wait; and between batches the
// worker serves its other connections. When the socket is full the
// session waits for Writable; after deliverRounds rounds it yields with
// Conn.Notify.
//
// What the bus dropped anyway (a subscriber that does not read while its
// queue overflows) is told before the next delivery with
// {"op":"dropped","count":N}, and counted per connection
// (Conn.CountDropped) and in Stats.Dropped.

const (
	// deliverBatch is one round, in the bus's queue bytes (about what
	// the JSON takes: 80 bytes of queue slot per message stand for the
	// JSON's own keys).
	deliverBatch = flushAt
	// deliverRounds is how many rounds one call writes at most.
	deliverRounds = 8
)

// Notified delivers what the subscription has.
func (s *session) Notified() (err error) {
	if s.closing || s.sub == nil {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.panicked(r)
		}
		err = s.end(err)
	}()
	if s.operatorChanged() {
		return s.closeWith(ClosePolicy, "operator access changed", ErrOperatorChanged)
	}
	return s.deliver()
}

// Writable resumes deliveries that waited for the socket.
func (s *session) Writable() error {
	if !s.waiting {
		return nil
	}
	s.waiting = false
	return s.Notified()
}

// deliver stages and writes rounds of deliveries while the socket takes
// them.
func (s *session) deliver() error {
	msgs := s.h.msgs.Get(0)
	defer s.h.msgs.Put(msgs)
	js := s.h.buf.Get(512)
	defer s.h.buf.Put(js)
	for round := 0; ; round++ {
		if s.sub.Disconnected() {
			return s.slowSubscriber()
		}
		if s.conn.Buffered() > 0 {
			s.waiting = true
			return nil
		}
		if round == deliverRounds {
			s.conn.Notify()
			return nil
		}
		batch := s.sub.Drain((*msgs)[:0], deliverBatch)
		*msgs = batch.Msgs
		if batch.Dropped > 0 {
			*js = s.dropped((*js)[:0], batch.Dropped)
			if err := s.stage(*js, false); err != nil {
				return err
			}
		}
		for i := range batch.Msgs {
			m := &batch.Msgs[i]
			if !s.wanted(m) {
				continue
			}
			*js = appendDelivery((*js)[:0], m)
			if err := s.stage(*js, true); err != nil {
				return err
			}
		}
		// The output was empty: this write goes ahead whatever its size.
		if err := s.flush(); err != nil {
			return err
		}
		if !batch.More {
			return nil
		}
	}
}

// dropped counts n lost deliveries and appends the notice that tells the
// client: {"op":"dropped","count":n}.
func (s *session) dropped(b []byte, n uint64) []byte {
	s.h.n.dropped.Add(n)
	s.conn.CountDropped(int(min(n, 1<<31-1)))
	b = append(b, `{"op":"dropped","count":`...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, '}')
}
