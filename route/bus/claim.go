package bus

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Errors a Writer returns to refuse a write; protocols answer them in
// their own words.
var (
	ErrNotWritable = errors.New("bus: topic is a device's value and not writable")
	ErrWriteValue  = errors.New("bus: value cannot be written to the device")
	ErrWriteBusy   = errors.New("bus: device cannot take the write now")
)

// ErrWriteFailed is the outcome of an accepted write the device did not
// take: it refused it (an exception), did not answer, its line was down,
// or the value read back was not the one written. The error wrapping it
// names the cause (and wraps the cause's own error where there is one).
var ErrWriteFailed = errors.New("bus: device did not take the write")

// Writer owns topics whose value comes from a device (a polled Modbus
// tag): a publish to one of them by anyone but the owner is a request to
// change the device, not a value, so it is neither cached nor delivered
// (the cache must not show a value the device does not have). Write
// returns at once: an error refuses the write (ErrNotWritable,
// ErrWriteValue, ErrWriteBusy, wrapped) and done is never called; nil
// accepts it, and the owner then reports the device's outcome itself (on
// a result topic, for everyone) and, when done is not nil, to the writer:
// done is called once, from any goroutine (possibly before Write
// returns), with nil when the device took the write or an error wrapping
// ErrWriteFailed. done must not block. Write is called on the publisher's
// goroutine with no bus lock held and must not block.
type Writer interface {
	Write(topic string, payload []byte, src string, done func(error)) error
}

// claims is an immutable snapshot: a publish reads it with one atomic
// load, and Claim replaces it whole.
type claims struct {
	byTopic map[string]claim
}

type claim struct {
	owner string // the src whose publishes are values, not writes
	w     Writer
}

// Claim makes topics the ones owner's w takes writes for, in place of
// those owner claimed before (an empty list releases them). owner is the
// src of the owner's own publishes, which go on the bus as usual. A topic
// claimed by another owner fails the call, as does an invalid topic; the
// call then changes nothing.
func (b *Bus) Claim(owner string, topics []string, w Writer) error {
	for _, t := range topics {
		if err := validTopic(t, b.opt.MaxTopicLen, MaxLevels); err != nil {
			return fmt.Errorf("bus: claim for %s: %w", owner, err)
		}
	}
	b.claimMu.Lock()
	defer b.claimMu.Unlock()
	next := map[string]claim{}
	if old := b.claims.Load(); old != nil {
		for t, c := range old.byTopic {
			if c.owner != owner {
				next[t] = c
			}
		}
	}
	for _, t := range topics {
		if c, taken := next[t]; taken {
			return fmt.Errorf("bus: claim for %s: %q is already %s's", owner, t, c.owner)
		}
		next[t] = claim{owner: owner, w: w}
	}
	if len(next) == 0 {
		b.claims.Store(nil)
	} else {
		b.claims.Store(&claims{byTopic: next})
	}
	return nil
}

// Claimed reports whether topic is claimed by a Writer.
func (b *Bus) Claimed(topic string) bool {
	_, ok := b.claimFor(topic)
	return ok
}

func (b *Bus) claimFor(topic string) (claim, bool) {
	cs := b.claims.Load()
	if cs == nil {
		return claim{}, false
	}
	c, ok := cs.byTopic[topic]
	return c, ok
}

// claimState is the Bus's part in claims (kept here with their code).
type claimState struct {
	claims atomic.Pointer[claims]
}
