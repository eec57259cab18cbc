package mesh

import (
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinel errors. A connection refused, by this rank or by its peer,
// fails with an error wrapping one of them; a peer's refusal also says
// "refused by the peer". Those of a disagreement between the ranks wrap
// errs.ErrMismatch as well.
var (
	// ErrHandshake: bytes that are not the handshake (a stranger, garbage,
	// a message out of turn).
	ErrHandshake = errors.New("bad handshake message")
	// ErrVersion: the peer speaks another version of the handshake.
	ErrVersion = fmt.Errorf("handshake version mismatch (%w)", errs.ErrMismatch)
	// ErrGroup: the peer belongs to another group (a rank of another run).
	ErrGroup = fmt.Errorf("group id mismatch (%w)", errs.ErrMismatch)
	// ErrLabel: the peer links by another kind of link (Config.Label).
	ErrLabel = fmt.Errorf("link kind mismatch (%w)", errs.ErrMismatch)
	// ErrRank: the ranks do not fit (the connection is not addressed to
	// this rank, or comes from a rank that does not dial it).
	ErrRank = fmt.Errorf("rank mismatch (%w)", errs.ErrMismatch)
	// ErrConfig: the group's size, the connections per peer or the
	// announced payload disagree.
	ErrConfig = fmt.Errorf("configuration mismatch (%w)", errs.ErrMismatch)
	// ErrAuth: a proof does not match the secret.
	ErrAuth = errors.New("authentication failed")
	// ErrDuplicate: that connection of that peer is being set up by
	// another handshake, or the mesh is complete.
	ErrDuplicate = errors.New("duplicate connection")
)

// Handshake statuses (challenge and verdict): each names one sentinel.
const (
	stOK        = 0
	stVersion   = 1
	stGroup     = 2
	stLabel     = 3
	stRank      = 4
	stConfig    = 5
	stMAC       = 6
	stDuplicate = 7
)

var statusErr = [...]error{
	stOK:        nil,
	stVersion:   ErrVersion,
	stGroup:     ErrGroup,
	stLabel:     ErrLabel,
	stRank:      ErrRank,
	stConfig:    ErrConfig,
	stMAC:       ErrAuth,
	stDuplicate: ErrDuplicate,
}

// refusal is the error a side refused by its peer with status st reports.
func refusal(st uint8) error {
	return fmt.Errorf("refused by the peer: %w", statusErr[st])
}

// statusOf is the status that tells the peer of err, one of the
// sentinels.
func statusOf(err error) uint8 {
	for st, e := range statusErr {
		if e != nil && errors.Is(err, e) {
			return uint8(st)
		}
	}
	return stConfig
}
