//go:build race

package rudp

// raceEnabled: the race detector slows the pure core tenfold and finds
// nothing in it (one goroutine), so the big loads run smaller under it.
const raceEnabled = true
