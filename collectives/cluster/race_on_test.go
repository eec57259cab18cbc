//go:build race

package cluster_test

// raceOn: the tests run under the race detector.
const raceOn = true
