package testenv

import (
	"testing"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/streams"
)

// Recorder opens backend's device under a choreotest.Recorder and closes it
// when the test ends. A backend that cannot open fails the test.
func Recorder(t testing.TB, backend string) *choreotest.Recorder {
	t.Helper()
	rec, err := choreotest.Open(backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	return rec
}

// RecordedStream starts a GPU stream under rt on a view of rec labelled
// label, and returns it with the queue that records it; a failure fails
// the test.
func RecordedStream(t testing.TB, rec *choreotest.Recorder, rt *actors.Runtime, label string) (*streams.GPU, *choreotest.Queue) {
	t.Helper()
	s, q, err := rec.NewStream(rt, label)
	if err != nil {
		t.Fatal(err)
	}
	return s, q
}
