//go:build race

package test

// raceOn: the tests run with the race detector, so the demo is built with
// it too.
const raceOn = true
