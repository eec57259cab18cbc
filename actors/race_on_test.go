//go:build race

package actors_test

// raceOn: the tests run under the race detector.
const raceOn = true
