//go:build race

package offheap

// raceEnabled: blocks come from the Go heap, where the race detector sees them.
const raceEnabled = true
