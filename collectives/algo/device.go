package algo

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// DeviceSignature is the match signature of d on the device-resident data
// path, for the first buffer of the window the path exposes (WindowTag).
func DeviceSignature(d Desc) []byte {
	c := &coll{d: d, alg: DeviceResident}
	s := c.signature()
	if d.Kind == KindAllToAll {
		s.count = int64(d.Count) // the device path's all-to-all has equal blocks: matched like a shape
	}
	return s.encode()
}

// WindowTag is the tag of d's PeerAccess window: the same for every data
// path, so ranks on different paths meet in one Expose and fail the match
// instead of waiting for each other.
func WindowTag(d Desc) transport.Tag {
	return transport.CollTag(d.Group, d.Seq, d.Part, stepWindow)
}

// MatchDevice checks the signatures every rank exposed (rank order) for a
// device-resident collective d of n ranks, the way the host paths' match
// does: a disagreement, an invalid op or root fails every rank alike (the
// error needs no abort).
func MatchDevice(d Desc, n int, sigs [][]byte) error {
	lo, hi := sigs[0], sigs[0]
	for _, s := range sigs {
		if len(s) != sigLen {
			return agreed("a signature of %d bytes: %w", len(s), ErrMismatch)
		}
		if bytes.Compare(s, lo) < 0 {
			lo = s
		}
		if bytes.Compare(s, hi) > 0 {
			hi = s
		}
	}
	if !bytes.Equal(lo, hi) {
		return mismatch(lo, hi)
	}
	c := &coll{d: d, n: n}
	return c.postMatch()
}

// Agreed reports whether err is one that every rank of the collective
// reaches by itself from the match (a mismatch, an invalid op or root), so
// that failing needs no abort.
func Agreed(err error) bool {
	var a agreedError
	return errors.As(err, &a)
}

// DeviceP2P is the point-to-point handshake of the device-resident path,
// on the tags of a Send or Recv of the host path (tag is transport.P2PTag's
// for the pair and count): the sender sends Hello (its signature and a
// handle its receiver looks up) on Sig, the receiver answers Done on Data
// once its kernel has copied the sender's buffer. A host-path peer meets
// it on the same tags with a message of another size and fails at once.
type DeviceP2P struct {
	Sig, Data transport.Tag
	Hello     []byte // the signature; the caller appends its handle
}

// NewDeviceP2P is d's handshake for the pair's tag.
func NewDeviceP2P(d Desc, tag transport.Tag) DeviceP2P {
	sig := signature{kind: KindSend, dtype: d.DType, count: int64(d.Count), alg: uint8(DeviceResident) << 1}.encode()
	return DeviceP2P{Sig: tag.WithStep(stepP2PSig), Data: tag.WithStep(stepP2PData), Hello: sig}
}

// Check compares a received Hello's signature with this side's; a
// difference is ErrShapeMismatch (dtype or count) or ErrMismatch.
func (h DeviceP2P) Check(got []byte) error {
	if len(got) < sigLen {
		return fmt.Errorf("a hello of %d bytes: %w", len(got), ErrMismatch)
	}
	if !bytes.Equal(got[:sigLen], h.Hello) {
		a, b := decodeSig(got[:sigLen]), decodeSig(h.Hello)
		if a.alg != b.alg {
			return fmt.Errorf("the sender is on another data path: %w", ErrMismatch)
		}
		return fmt.Errorf("sent %s x %d, receiving %s x %d: %w: %w", a.dtype, a.count, b.dtype, b.count, ErrShapeMismatch, ErrMismatch)
	}
	return nil
}
