package poll

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/edgemux/edgemux/protocols/modbus/upstream"
	"github.com/edgemux/edgemux/route/bus"
)

// Writes from the bus. The poller claims its tags' topics on the bus
// (Topics, bus.Claim): a publish to a tag's topic from any protocol is
// then a request to write the device, handed to Write, and never a value
// in the last-value cache (the device may refuse it; the next poll's
// value is the truth). Write refuses at once what cannot go (a tag not
// writable, a value it cannot carry, too many writes waiting), which the
// writer's protocol answers in its own words; an accepted write goes to
// the device's line, where writes go ahead of polls, and its outcome is
// published on the tag's result topic (ResultTopic) and, when the writer
// asked (bus.PublishDone), told to it, after which the device is polled
// at once so the tag's topic shows what it now holds.

// maxWritesWaiting bounds a device's writes accepted and not finished.
const maxWritesWaiting = 16

// ResultTopic is where the outcome of writes to topic is published:
// {"ok":true,"ts":...} ("v": the value read back, with readback), or
// {"ok":false,"err":"exception 0x02","ts":...}.
func ResultTopic(topic string) string { return topic + "/$result" }

// Topics lists what the poller claims on the bus: every tag's topic and
// each writable tag's result topic.
func (p *Poller) Topics() []string {
	var out []string
	for _, d := range p.devs {
		for _, t := range d.Tags {
			out = append(out, t.Topic)
			if t.Writable {
				out = append(out, ResultTopic(t.Topic))
			}
		}
	}
	return out
}

// tagRef finds a tag by its topic.
type tagRef struct {
	d *polled
	i int
}

// Write implements bus.Writer: value is the payload published to a tag's
// topic by src. Errors wrap bus.ErrNotWritable, bus.ErrWriteValue or
// bus.ErrWriteBusy. done, when not nil, gets the outcome published on the
// result topic: nil, or an error wrapping bus.ErrWriteFailed and the
// cause (upstream.ErrTimeout and the line's other errors, an Exception,
// ErrReadBack).
func (p *Poller) Write(topic string, value []byte, src string, done func(error)) error {
	ref, ok := p.byTopic[topic]
	if !ok {
		return fmt.Errorf("%w: %s is the poller's result topic", bus.ErrNotWritable, topic)
	}
	d, t := ref.d, &ref.d.Tags[ref.i]
	if !t.Writable {
		return fmt.Errorf("%w: %s is read-only (poll.tags[].writable)", bus.ErrNotWritable, topic)
	}
	pdu, err := EncodeWrite(t.Tag, value)
	switch {
	case errors.Is(err, ErrNotWritable):
		return fmt.Errorf("%w: %s: %w", bus.ErrNotWritable, topic, err)
	case err != nil:
		return fmt.Errorf("%w: %s: %w", bus.ErrWriteValue, topic, err)
	case p.ctx.Err() != nil:
		return fmt.Errorf("%w: the poller is closed", bus.ErrWriteBusy)
	}
	if d.waiting.Add(1) > maxWritesWaiting {
		d.waiting.Add(-1)
		return fmt.Errorf("%w: %d writes to %s waiting", bus.ErrWriteBusy, maxWritesWaiting, d.Dev.Name())
	}
	d.writes.Add(1)
	p.log.Debug("poll: write", "topic", topic, "src", src, "device", d.Dev.Name())
	w := &write{ref: ref, pdu: pdu, done: done}
	d.Dev.Submit(pdu, func(r upstream.Result) { p.written(w, r) })
	return nil
}

// write is one accepted write on its way through the device's line.
type write struct {
	ref  tagRef
	pdu  []byte      // the request, to compare a read-back with
	done func(error) // the writer's, or nil
}

// Exception is a device's exception answer (its code).
type Exception byte

func (e Exception) Error() string { return fmt.Sprintf("exception %#02x", byte(e)) }

// ErrReadBack is a write the device answered whose read-back failed or
// showed another value than the one written.
var ErrReadBack = errors.New("written; read-back")

// written takes a write's answer on the line's goroutine: it must not
// block. With read-back, the tag is read before the outcome is told, and
// the device must hold what was written.
func (p *Poller) written(w *write, r upstream.Result) {
	t := w.ref.d.Tags[w.ref.i]
	err := failure(r)
	if err != nil || !t.ReadBack {
		p.finishWrite(w, err, nil)
		return
	}
	read := Read{Table: t.Table, Start: t.Address, Count: t.Width()}
	w.ref.d.Dev.Submit(read.PDU(), func(r upstream.Result) {
		if err := failure(r); err != nil {
			p.finishWrite(w, fmt.Errorf("%w: %w", ErrReadBack, err), nil)
			return
		}
		v, err := Decode(t.Tag, t.Address, r.PDU[2:])
		switch {
		case err != nil:
			p.finishWrite(w, fmt.Errorf("%w: %w", ErrReadBack, err), nil)
		case !holdsWritten(w.pdu, r.PDU[2:]):
			p.finishWrite(w, fmt.Errorf("%w: the device holds %s", ErrReadBack, v.AppendJSON(nil)), &v)
		default:
			p.finishWrite(w, nil, &v)
		}
	})
}

// holdsWritten reports whether a read-back's data is what the write
// request pdu (FC 5, 6 or 16, from EncodeWrite) put there.
func holdsWritten(pdu, data []byte) bool {
	switch {
	case len(pdu) == 5 && pdu[0] == 5: // a coil: ON is 0xFF00
		return len(data) >= 1 && (data[0]&1 == 1) == (pdu[3] == 0xFF)
	case len(pdu) == 5 && pdu[0] == 6:
		return bytes.Equal(data, pdu[3:5])
	case len(pdu) > 6 && pdu[0] == 16:
		return bytes.Equal(data, pdu[6:])
	}
	return false
}

// failure is why a result is not a normal answer, or nil.
func failure(r upstream.Result) error {
	switch {
	case r.Err != nil:
		return r.Err
	case len(r.PDU) >= 2 && r.PDU[0]&0x80 != 0:
		return Exception(r.PDU[1])
	case len(r.PDU) < 2:
		return errors.New("short response")
	}
	return nil
}

// finishWrite counts a write's outcome, publishes it on the result topic,
// tells the writer, and asks for a poll of the device now.
func (p *Poller) finishWrite(w *write, cause error, readBack *Value) {
	d := w.ref.d
	d.waiting.Add(-1)
	why := ""
	if cause == nil {
		d.writesOK.Add(1)
	} else {
		d.writesFailed.Add(1)
		why = cause.Error()
	}
	topic := d.Tags[w.ref.i].Topic
	if err := p.pub.Publish(ResultTopic(topic), writeResult(why, readBack, time.Now()), Source); err != nil {
		p.log.Warn("poll: write result not published", "topic", ResultTopic(topic), "err", err)
	}
	if w.done != nil {
		if cause != nil {
			cause = fmt.Errorf("%w: %s on %s: %w", bus.ErrWriteFailed, topic, d.Dev.Name(), cause)
		}
		w.done(cause)
	}
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// writeResult is a result topic's payload.
func writeResult(why string, readBack *Value, now time.Time) []byte {
	out := []byte(`{"ok":`)
	out = strconv.AppendBool(out, why == "")
	if readBack != nil {
		out = append(out, `,"v":`...)
		out = readBack.AppendJSON(out)
	}
	if why != "" {
		out = append(out, `,"err":`...)
		out = Value{Kind: KindString, S: why}.AppendJSON(out)
	}
	out = append(out, `,"ts":`...)
	out = strconv.AppendInt(out, now.UnixMilli(), 10)
	return append(out, '}')
}
