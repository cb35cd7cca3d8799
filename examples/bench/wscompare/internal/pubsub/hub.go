package pubsub

import (
	"fmt"
	"sync"
)

// Hub is the in-process topic map a plain Go WebSocket app would write:
// filter -> set of subscribers, under one RWMutex. Publish walks the
// filters (few in practice) and calls deliver for each matching
// subscriber while holding the read lock, so deliver must not block or
// call back into the Hub.
//
// A subscriber that holds two overlapping filters gets a message twice;
// MQTT's deduplication is out of scope for a benchmark peer.
type Hub[S comparable] struct {
	mu      sync.RWMutex
	filters map[string]map[S]struct{}
}

// NewHub returns an empty Hub.
func NewHub[S comparable]() *Hub[S] {
	return &Hub[S]{filters: make(map[string]map[S]struct{})}
}

// Subscribe adds s under filter. held is how many filters s holds already
// (the caller tracks it per connection), capped at MaxSubs.
func (h *Hub[S]) Subscribe(filter string, s S, held int) error {
	if held >= MaxSubs {
		return fmt.Errorf("%w: %d", ErrTooManySubs, held)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.filters[filter]
	if set == nil {
		set = make(map[S]struct{})
		h.filters[filter] = set
	}
	set[s] = struct{}{}
	return nil
}

// Unsubscribe removes s from filter; removing what is not there is a no-op.
func (h *Hub[S]) Unsubscribe(filter string, s S) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(filter, s)
}

// RemoveAll removes s from every filter in filters (the ones it held), as
// a connection closes.
func (h *Hub[S]) RemoveAll(filters []string, s S) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range filters {
		h.removeLocked(f, s)
	}
}

func (h *Hub[S]) removeLocked(filter string, s S) {
	set := h.filters[filter]
	delete(set, s)
	if len(set) == 0 {
		delete(h.filters, filter)
	}
}

// Publish calls deliver for every subscriber whose filter matches topic
// and returns how many calls it made.
func (h *Hub[S]) Publish(topic string, deliver func(S)) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for f, set := range h.filters {
		if !Match(f, topic) {
			continue
		}
		for s := range set {
			deliver(s)
			n++
		}
	}
	return n
}

// Len is the number of (filter, subscriber) pairs.
func (h *Hub[S]) Len() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, set := range h.filters {
		n += len(set)
	}
	return n
}

// Apply carries out one client message from self, who holds *filters
// (updated in place). A publish is encoded once and handed to deliver for
// each matching subscriber; now gives its "ts". The reply, if not nil, is
// what self should be sent back (an error message).
func (h *Hub[S]) Apply(self S, filters *[]string, msg []byte, now func() int64, deliver func(S, []byte)) (reply []byte) {
	req, err := ParseRequest(msg)
	if err != nil {
		return EncodeError(err)
	}
	switch req.Op {
	case OpSub:
		if contains(*filters, req.Topic) {
			return nil
		}
		if err := h.Subscribe(req.Topic, self, len(*filters)); err != nil {
			return EncodeError(err)
		}
		*filters = append(*filters, req.Topic)
	case OpUnsub:
		h.Unsubscribe(req.Topic, self)
		*filters = without(*filters, req.Topic)
	case OpPub:
		b := EncodePush(req.Topic, req.Data, now())
		h.Publish(req.Topic, func(s S) { deliver(s, b) })
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func without(list []string, s string) []string {
	out := list[:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
