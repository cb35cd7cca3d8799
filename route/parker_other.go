//go:build !linux

package route

import (
	"errors"
	"time"
)

// ErrNoEventfd is returned by NewEventfdParker where eventfd(2) does not
// exist.
var ErrNoEventfd = errors.New("route: eventfd is linux-only")

// EventfdParker is the eventfd Sleeper; it exists only on Linux.
type EventfdParker struct{}

// NewEventfdParker fails outside Linux; use NewChanParker.
func NewEventfdParker() (*EventfdParker, error) { return nil, ErrNoEventfd }

// Sleep implements Sleeper.
func (*EventfdParker) Sleep(time.Duration) bool { return false }

// Wake implements Sleeper.
func (*EventfdParker) Wake() {}

// Close implements Sleeper.
func (*EventfdParker) Close() error { return nil }
