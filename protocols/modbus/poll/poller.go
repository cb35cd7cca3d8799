package poll

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemux/edgemux/protocols/modbus/upstream"
)

// Publisher is where samples go: the bus (*bus.Bus).
type Publisher interface {
	Publish(topic string, payload []byte, src string) error
}

// Source is the bus src of the poller's messages.
const Source = "modbus-poll"

// PolledTag is a tag and how it is published.
type PolledTag struct {
	Tag
	Deadband float64 // on change: a good value within this of the last published one is not published
	Writable bool    // a publish to its topic writes the device (write.go); refused otherwise
	ReadBack bool    // a write is read back before its outcome is told
}

// Device is one upstream device's polling.
type Device struct {
	Dev      *upstream.Device
	Interval time.Duration // between the starts of two polls (default 1s)
	Limits   Limits
	OnChange bool // publish a tag when it changes (quality, or value beyond its deadband), not every poll
	Tags     []PolledTag
}

// Stats counts a device's polling since Start.
type Stats struct {
	Device    string
	Polls     uint64 // poll cycles finished
	Reads     uint64 // read requests sent (each coalesced read once)
	Failed    uint64 // reads without an answer (timeout, demoted, line down)
	Refused   uint64 // reads answered with an exception
	Published uint64 // samples the bus took
	Dropped   uint64 // samples the bus refused
	Decode    uint64 // tag values that did not decode (NaN, infinity)
	Writes    uint64 // writes accepted from the bus
	WritesOK  uint64 // writes the device took (and read back, if asked)
	WritesBad uint64 // writes refused by the device or failed on the way
	LastPoll  time.Time
}

// Poller polls devices, one goroutine each; the devices' lines keep one
// request in flight, so devices on one line take turns there.
type Poller struct {
	pub     Publisher
	log     *slog.Logger
	devs    []*polled
	byTopic map[string]tagRef // every tag, for writes
	stop    context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
}

type polled struct {
	Device
	reads                                              []Read
	state                                              []tagState
	buf                                                []byte
	kick                                               chan struct{} // cap 1: poll now (a write finished)
	polls, nreads, failed, refused, published, dropped atomic.Uint64
	decodeErrs, writes, writesOK, writesFailed         atomic.Uint64
	waiting                                            atomic.Int64 // writes accepted, not finished
	lastPoll                                           atomic.Int64 // Unix nanoseconds
}

// New plans every device's reads; nothing runs until Start.
func New(devs []Device, pub Publisher, log *slog.Logger) *Poller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Poller{pub: pub, log: log, byTopic: map[string]tagRef{}}
	p.ctx, p.stop = context.WithCancel(context.Background())
	for _, d := range devs {
		if d.Interval <= 0 {
			d.Interval = time.Second
		}
		tags := make([]Tag, len(d.Tags))
		for i, t := range d.Tags {
			tags[i] = t.Tag
		}
		pd := &polled{Device: d, reads: Plan(tags, d.Limits), state: make([]tagState, len(d.Tags)), kick: make(chan struct{}, 1)}
		for i, t := range d.Tags {
			p.byTopic[t.Topic] = tagRef{d: pd, i: i}
		}
		p.devs = append(p.devs, pd)
	}
	return p
}

// Start starts polling every device.
func (p *Poller) Start() {
	for _, d := range p.devs {
		p.wg.Add(1)
		go p.run(d)
	}
}

// Close stops polling and waits for each device's poll in flight.
func (p *Poller) Close() {
	p.stop()
	p.wg.Wait()
}

// Stats snapshots every device's counters, in configuration order.
func (p *Poller) Stats() []Stats {
	out := make([]Stats, 0, len(p.devs))
	for _, d := range p.devs {
		st := Stats{Device: d.Dev.Name(), Polls: d.polls.Load(), Reads: d.nreads.Load(), Failed: d.failed.Load(),
			Refused: d.refused.Load(), Published: d.published.Load(), Dropped: d.dropped.Load(), Decode: d.decodeErrs.Load(),
			Writes: d.writes.Load(), WritesOK: d.writesOK.Load(), WritesBad: d.writesFailed.Load()}
		if ns := d.lastPoll.Load(); ns != 0 {
			st.LastPoll = time.Unix(0, ns)
		}
		out = append(out, st)
	}
	return out
}

func (p *Poller) run(d *polled) {
	defer p.wg.Done()
	tick := time.NewTicker(d.Interval)
	defer tick.Stop()
	for {
		p.poll(d)
		select {
		case <-tick.C:
		case <-d.kick:
		case <-p.ctx.Done():
			return
		}
	}
}

// poll runs one cycle: every planned read, each tag published from its
// read's answer with the time that answer came.
func (p *Poller) poll(d *polled) {
	for _, r := range d.reads {
		res := d.Dev.Do(p.ctx, r.PDU())
		if p.ctx.Err() != nil {
			return
		}
		d.nreads.Add(1)
		now := time.Now()
		why, refused := "", false
		switch {
		case res.Err != nil:
			why = res.Err.Error()
			d.failed.Add(1)
		case len(res.PDU) >= 2 && res.PDU[0]&0x80 != 0:
			why, refused = fmt.Sprintf("exception %#02x", res.PDU[1]), true
			d.refused.Add(1)
		case len(res.PDU) < 2:
			why, refused = "short response", true
			d.refused.Add(1)
		}
		for _, i := range r.Tags {
			var v Value
			if why == "" {
				var err error
				// CheckResponse matched the byte count to the request,
				// so the data covers the read.
				if v, err = Decode(d.Tags[i].Tag, r.Start, res.PDU[2:]); err != nil {
					d.decodeErrs.Add(1)
					p.emit(d, i, d.state[i].next(v, now, err.Error(), true))
					continue
				}
			}
			p.emit(d, i, d.state[i].next(v, now, why, refused))
		}
	}
	d.lastPoll.Store(time.Now().UnixNano())
	d.polls.Add(1)
}

func (p *Poller) emit(d *polled, i int, s Sample) {
	t, st := &d.Tags[i], &d.state[i]
	wasPublished, last := st.published, st.last
	if !st.publish(s, d.OnChange, t.Deadband) {
		return
	}
	d.buf = s.AppendPayload(d.buf[:0])
	if err := p.pub.Publish(t.Topic, d.buf, Source); err != nil {
		// Not on the bus: on change, the next poll offers it again
		// (unchanged values included) until the bus takes it.
		st.published, st.last = wasPublished, last
		d.dropped.Add(1)
		p.log.Debug("poll: publish refused", "topic", t.Topic, "err", err)
		return
	}
	d.published.Add(1)
}
