//go:build race

package collectives_test

// raceOn: the tests run with the race detector.
const raceOn = true
