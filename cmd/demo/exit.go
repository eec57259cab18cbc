package main

// exitPeerLost is a rank's exit status when it failed because another
// rank was lost: its launcher then looks for the rank that failed first.
const exitPeerLost = 3

// exitError is an error with the exit status the demo ends with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
