//go:build !race

package remoting_test

// raceOn: the tests run under the race detector.
const raceOn = false
