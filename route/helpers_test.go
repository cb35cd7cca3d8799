package route

import (
	"testing"
	"time"
)

// waitLimit is generous on purpose: the test machines are slow and shared.
const waitLimit = 60 * time.Second

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
