//go:build race

package coap

// raceEnabled: the race detector adds its own shadow memory and makes
// sync.Pool drop items at random, so memory and allocation figures are
// meaningless under it.
const raceEnabled = true
