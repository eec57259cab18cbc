//go:build !race

package test

const raceOn = false
