//go:build !race

package modbus

const raceEnabled = false
