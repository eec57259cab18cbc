package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// The device-resident path's meeting over plain messages, for ranks in
// separate processes (no PeerAccess window): the ranks match the device
// signature the way the host path's ranks match theirs (same steps, same
// message sizes, so a rank on the host path meets a rank on the device
// path in the match and every rank fails it), then each rank sends every
// peer its descriptor (what its peers need to reach its buffers), and
// after their kernels the ranks meet once more (SyncDevice).
const (
	stepDeviceMeet = stepData     // the descriptors
	stepDeviceSync = stepData + 1 // the barrier after the kernels
)

// MeetDevice matches d on every rank and exchanges the ranks'
// descriptors: all[q] receives rank q's (all[rank] is set to mine). Every
// descriptor must have len(mine) bytes. A mismatch, an invalid op or root
// fails every rank alike (Agreed); any other failure is the caller's to
// abort.
func MeetDevice(ctx context.Context, t transport.Transport, d Desc, mine []byte, all [][]byte) error {
	c := newColl(ctx, t, d, d.Kind, nil)
	c.alg = DeviceResident
	if !c.tagged {
		return fmt.Errorf("algo: device %s: seq %d part %d outside the tag layout: %w", d.Kind, d.Seq, d.Part, ErrBadArgument)
	}
	if len(all) != c.n {
		return fmt.Errorf("algo: device %s: %d descriptors for %d ranks: %w", d.Kind, len(all), c.n, ErrBadArgument)
	}
	if c.n > 1 {
		if err := c.matchMessagesOf(DeviceSignature(d)); err != nil {
			return err
		}
	}
	if err := c.postMatch(); err != nil {
		return err
	}
	return c.exchangeAll(mine, all)
}

// Exchange sends mine to every rank under d's tag and receives every
// rank's into all (all[rank] set to mine; each of len(mine) bytes): a
// plain all-gather of small records, for agreements made outside the
// ops (a group's devices when it is made: d.Seq 0, which no op takes).
func Exchange(ctx context.Context, t transport.Transport, d Desc, mine []byte, all [][]byte) error {
	c := newColl(ctx, t, d, d.Kind, nil)
	if !c.tagged || len(all) != c.n {
		return fmt.Errorf("algo: exchange: seq %d, %d records for %d ranks: %w", d.Seq, len(all), c.n, ErrBadArgument)
	}
	return c.exchangeAll(mine, all)
}

// exchangeAll is Exchange's and MeetDevice's pairwise exchange.
func (c *coll) exchangeAll(mine []byte, all [][]byte) error {
	all[c.rank] = append(all[c.rank][:0], mine...)
	for q := range all {
		if q != c.rank && len(all[q]) != len(mine) {
			all[q] = make([]byte, len(mine))
		}
	}
	if c.n == 1 {
		return nil
	}
	return c.pairwise(c.ctx, stepDeviceMeet, func(int) []byte { return mine }, func(p int) []byte { return all[p] })
}

// SyncDevice is the barrier of a device-resident collective d over plain
// messages: it returns once every rank has called it (each after its
// kernels ran), or fails like a Send or Recv would.
func SyncDevice(ctx context.Context, t transport.Transport, d Desc) error {
	c := newColl(ctx, t, d, d.Kind, nil)
	if !c.tagged || c.n == 1 {
		return nil
	}
	one := []byte{1}
	got := make([][]byte, c.n)
	for q := range got {
		got[q] = make([]byte, 1)
	}
	return c.pairwise(ctx, stepDeviceSync, func(int) []byte { return one }, func(p int) []byte { return got[p] })
}
