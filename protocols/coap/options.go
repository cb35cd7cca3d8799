package coap

import (
	"encoding/binary"

	"github.com/plgd-dev/go-coap/v3/message"

	"github.com/edgemux/edgemux/route/bus"
)

// Option numbers, short.
const (
	optObserve       = message.Observe
	optETag          = message.ETag
	optContentFormat = message.ContentFormat
	optBlock1        = message.Block1
	optBlock2        = message.Block2
	optSize1         = message.Size1
	optSize2         = message.Size2
)

// etagOf is a value's ETag: its bus sequence number, which grows with
// every publish to its topic.
func etagOf(m *bus.Message) []byte {
	var tag [8]byte
	binary.BigEndian.PutUint64(tag[:], m.Seq)
	return tag[:]
}
