package shm

import "fmt"

// LosePeer marks rank lost for cause, as if its process had ended: its
// pending and future operations on this endpoint fail with
// transport.ErrPeerLost wrapping cause (eager messages that arrived whole
// stay receivable), its socket closes and its region is unmapped. A
// control plane that learns of a peer's death first calls it so that no
// operation waits for the heartbeat. An unknown rank, this rank, or a peer
// already lost is ignored.
func (t *Transport) LosePeer(rank int, cause error) {
	p, err := t.peerOf(rank)
	if err != nil {
		return
	}
	if cause == nil {
		cause = fmt.Errorf("rank %d reported lost", rank)
	}
	p.lose(cause)
}
