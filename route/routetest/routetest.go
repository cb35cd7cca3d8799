// Package routetest holds the one polling helper the tests of every
// package share (the gateway's, the command's, route/cluster's,
// route/north's). It imports nothing of edgemux, so any test package can
// use it without an import cycle.
package routetest

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds and fails the test after a
// generous limit. The limit is a hang guard on shared 2-core machines,
// not a performance assertion: tests assert order, counts and final
// states, never how fast they came.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
