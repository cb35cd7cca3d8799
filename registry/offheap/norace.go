//go:build !race

package offheap

// raceEnabled: blocks are mapped outside the Go heap.
const raceEnabled = false
