package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"golang.org/x/sys/unix"
)

// The pair's socket is authenticated by package mesh (label "shm", the
// higher rank dialing the lower one), whose handshake carries each rank's
// hello. Then setupRegion hands the region over: the lower rank creates
// it and sends its descriptor (SCM_RIGHTS) with one byte; the higher rank
// checks and maps it and answers one byte, 0 when it did. No region
// exists before both sides proved the secret.

// hello is what a rank announces to each peer in the handshake, its
// fields little endian in order (28 bytes): its window (MaxBuffered), the
// geometry of the regions it creates, the run's hash, and the address of
// its cross-memory probe word (0: single copy off; see cma.go).
type hello struct {
	Window, SlotSize, Slots uint32
	Run                     [8]byte
	Probe                   uint64
}

func (c *Config) hello() hello {
	return hello{Window: uint32(c.MaxBuffered), SlotSize: uint32(c.SlotSize), Slots: uint32(c.Slots),
		Run: runHash(c.Run), Probe: c.probeAddr()}
}

func (h hello) encode() []byte {
	b, _ := binary.Append(nil, binary.LittleEndian, h)
	return b
}

func decodeHello(b []byte) (h hello, err error) {
	if n, err := binary.Decode(b, binary.LittleEndian, &h); err != nil || n != len(b) {
		return h, fmt.Errorf("a hello of %d bytes", len(b))
	}
	return h, nil
}

// checkHello judges a peer's hello: the same run, a window in bounds.
func (c *Config) checkHello(_ int, b []byte) error {
	h, err := decodeHello(b)
	switch {
	case err != nil:
		return err
	case h.Run != runHash(c.Run):
		return errors.New("another run")
	case !windowOK(h.Window):
		return fmt.Errorf("window %d", h.Window)
	}
	return nil
}

func windowOK(w uint32) bool { return w >= msg.Overhead && w <= maxRegion }

// region is a pair's mapped region, as Setup leaves it in the mesh.Link.
type region struct {
	mem []byte
	g   geometry
}

func (r *region) Close() error {
	unmap(r.mem)
	return nil
}

func (c *Config) setupRegion(_ context.Context, l *mesh.Link) error {
	nc, ok := l.Conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a unix socket: %T", l.Conn)
	}
	if l.Dialed {
		return c.mapRegion(nc, l)
	}
	g := geometry{slotSize: c.SlotSize, slots: c.Slots, group: c.Group, low: c.Rank, high: l.Peer}
	f, mem, err := newRegion(regionSize(g.slotSize, g.slots))
	if err != nil {
		return err
	}
	writeHeader(mem, g)
	l.Extra = &region{mem: mem, g: g}
	_, _, err = nc.WriteMsgUnix([]byte{0}, unix.UnixRights(int(f.Fd())), nil)
	_ = f.Close()
	if err != nil {
		return err
	}
	var ready [2]byte
	n, err := nc.Read(ready[:])
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the peer to map the region: %w", err)
	case n != 1 || ready[0] != 0:
		return errors.New("the peer could not map the region")
	}
	return nil
}

func (c *Config) mapRegion(nc *net.UnixConn, l *mesh.Link) error {
	fd, err := readRegionFD(nc)
	if err != nil {
		return err
	}
	h, _ := decodeHello(l.Hello) // checked by checkHello
	mem, g, err := mapPeerRegion(fd, int(h.SlotSize), int(h.Slots), c.Group, l.Peer, c.Rank)
	if err != nil {
		_, _ = nc.Write([]byte{1})
		return err
	}
	l.Extra = &region{mem: mem, g: g}
	_, err = nc.Write([]byte{0})
	return err
}

func readRegionFD(nc *net.UnixConn) (int, error) {
	var b [2]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := nc.ReadMsgUnix(b[:], oob)
	if err != nil {
		return -1, fmt.Errorf("waiting for the region: %w", err)
	}
	fds, err := rights(oob[:oobn])
	if err != nil {
		return -1, err
	}
	if n != 1 || b[0] != 0 || len(fds) != 1 {
		for _, f := range fds {
			closeFD(f)
		}
		return -1, fmt.Errorf("a region hand-over of %d bytes and %d descriptors", n, len(fds))
	}
	return fds[0], nil
}

// mapPeerRegion maps and checks the region a lower rank handed over; it
// closes fd.
func mapPeerRegion(fd, slotSize, slots int, group uint64, low, high int) ([]byte, geometry, error) {
	defer closeFD(fd)
	if err := checkGeometry(slotSize, slots); err != nil {
		return nil, geometry{}, err
	}
	mem, err := openRegion(fd, regionSize(slotSize, slots))
	if err != nil {
		return nil, geometry{}, err
	}
	g, err := readHeader(mem, group, low, high)
	if err != nil {
		unmap(mem)
		return nil, g, fmt.Errorf("region: %w", err)
	}
	return mem, g, nil
}

func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var fds []int
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err == nil {
			fds = append(fds, f...)
		}
	}
	return fds, nil
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}
