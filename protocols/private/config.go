package private

import (
	"time"

	"github.com/edgemux/edgemux/config"
)

// Defaults for zero (or negative) fields of config.Private. The config
// package's Defaults should use the same values.
const (
	DefaultMaxTopic    = 256
	DefaultMaxSubs     = 64
	DefaultQueue       = 65536
	DefaultHelloWithin = 10 * time.Second
)

// Hard caps: a configured value above them is clamped. MaxFrameCap is
// also the config's upper bound for private.max_frame.
const (
	MaxFrameCap = 16 << 20
	MaxTopicCap = maxU16 // the u16 length prefix
)

// withDefaults fills zero fields and clamps the rest to the caps.
func withDefaults(c config.Private) config.Private {
	orDefault := func(v *int, def, limit int) {
		if *v <= 0 {
			*v = def
		}
		*v = min(*v, limit)
	}
	orDefault(&c.MaxFrame, DefaultMaxFrame, MaxFrameCap)
	orDefault(&c.MaxTopic, DefaultMaxTopic, MaxTopicCap)
	orDefault(&c.MaxSubs, DefaultMaxSubs, 1<<16)
	orDefault(&c.Queue, DefaultQueue, 1<<20)
	if c.HelloWithin <= 0 {
		c.HelloWithin = DefaultHelloWithin
	}
	return c
}
