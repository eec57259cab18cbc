package shm

import (
	"fmt"
	"slices"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Defaults of Config's limits.
const (
	DefaultSlotSize    = 1 << 20 // a ring chunk (algo's DefaultNetChunkBytes) in one slot
	DefaultSlots       = 16
	DefaultEagerMax    = 65 << 10 // 64 KiB and a small header (a 2-rank all-reduce's signature)
	DefaultMaxBuffered = msg.DefaultMaxBuffered
	// DefaultHeartbeatInterval is the longest default HeartbeatInterval:
	// the heartbeat also moves what arrives while nothing waits on a peer.
	DefaultHeartbeatInterval = 250 * time.Millisecond
	DefaultPeerTimeout       = 10 * time.Second
	// DefaultHandshakeTimeout bounds one connection's handshake.
	DefaultHandshakeTimeout = 5 * time.Second
	// MinSecret is the shortest Secret accepted.
	MinSecret = 16

	// Bounds of the ring geometry: a region holds two rings of Slots
	// slots of SlotSize bytes (plus a slot header each).
	minSlotSize = 4 << 10
	maxSlotSize = 16 << 20
	minSlots    = 2
	maxSlots    = 1024
	maxRegion   = 1 << 30
)

// Config describes one rank of a group whose ranks are processes of one
// host. Every rank of a group is given the same Size, Group, Run and
// Secret; the limits may differ (the lower rank of a pair creates its
// region with its own SlotSize and Slots, and each side announces its own
// MaxBuffered in the handshake). Zero limits take the defaults.
type Config struct {
	// Rank is this endpoint's rank, 0 <= Rank < Size.
	Rank, Size int
	// Group and Run (any string) name this run: with the rank they name
	// each rank's rendezvous socket, and a rank of another group or run
	// is refused.
	Group uint64
	Run   string
	// Secret is shared by the ranks of the group (at least MinSecret
	// bytes); the handshake proves it, never sends it, and a region is
	// handed only to a peer that proved it.
	Secret []byte
	// Peers are the ranks this rank links to, in increasing order (nil:
	// every other rank). A rank listed here must list this one.
	Peers []int

	// SlotSize is the payload bytes of one ring slot (a multiple of 64);
	// large messages travel in slots of this size. Default
	// DefaultSlotSize. The variable CHOREO_SHM_SLOT_SIZE overrides it.
	SlotSize int
	// Slots is the number of slots of each ring (one ring per direction
	// of a pair). Default DefaultSlots. The variable CHOREO_SHM_SLOTS
	// overrides it.
	Slots int
	// EagerMax is the largest message sent before its Recv is posted,
	// when the receiver's window has room; it is capped by the pair's
	// SlotSize. Larger ones wait for the Recv. Default DefaultEagerMax.
	EagerMax int
	// MaxBuffered bounds, per peer, the bytes this rank holds for Recvs
	// not posted yet (each message counts 64 bytes more); a sender that
	// would exceed it waits for the Recv instead. Default
	// DefaultMaxBuffered.
	MaxBuffered int
	// PeerTimeout is how long a peer may stay silent before it is lost.
	// A peer whose process ends is lost at once (its socket closes).
	// Default DefaultPeerTimeout.
	PeerTimeout time.Duration
	// HeartbeatInterval is how often idle peers are pinged and their
	// silence is checked; at most PeerTimeout/3. Default min(PeerTimeout/4,
	// DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// HandshakeTimeout bounds each connection's handshake. Default
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// CMAMin is the least message offered to the receiver by address
	// (single copy, see cma.go): a receiver that may read this process's
	// memory copies it straight from the sender's buffer; smaller
	// messages, and every message to a receiver that does not, go through
	// the slots. Negative turns single copy off (this rank neither offers
	// nor reads). Zero offers from DefaultCMAMin bytes, and this rank
	// reads where that pays (see cmaPays); a positive value reads
	// wherever the host allows it. The variable CHOREO_SHM_CMA overrides
	// it ("off", "auto", or a byte count).
	CMAMin int
	// cmaAuto: CMAMin was left to the default (see cmaPays).
	cmaAuto bool

	// OnRefused, if set, is called (from a connection's goroutine, during
	// Connect; it must not block) with the reason each refused connection
	// was refused. Connections turned away because every handshake slot
	// was taken (errors.Is(err, gate.ErrFull)) are reported together, at
	// most once a second, in one error that gives their number. The
	// package itself never logs.
	OnRefused func(error)
}

// normalize checks c and fills in the defaults.
func (c Config) normalize() (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("shm: rank %d: config: %w: %s", c.Rank, transport.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return bad("rank %d of size %d", c.Rank, c.Size)
	}
	if len(c.Secret) < MinSecret {
		return bad("secret of %d bytes, want at least %d", len(c.Secret), MinSecret)
	}
	c.Secret = append([]byte(nil), c.Secret...)
	if !c.peers() {
		return bad("Peers %v: want other ranks in increasing order", c.Peers)
	}
	if err := c.ringFromEnv(); err != nil {
		return bad("%v", err)
	}
	if c.SlotSize == 0 {
		c.SlotSize = DefaultSlotSize
	}
	if c.SlotSize < minSlotSize || c.SlotSize > maxSlotSize || c.SlotSize%64 != 0 {
		return bad("SlotSize %d: want a multiple of 64 in [%d, %d]", c.SlotSize, minSlotSize, maxSlotSize)
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Slots < minSlots || c.Slots > maxSlots {
		return bad("Slots %d outside [%d, %d]", c.Slots, minSlots, maxSlots)
	}
	if regionSize(c.SlotSize, c.Slots) > maxRegion {
		return bad("%d slots of %d bytes: region over %d bytes", c.Slots, c.SlotSize, maxRegion)
	}
	if c.EagerMax == 0 {
		c.EagerMax = DefaultEagerMax
	}
	if c.EagerMax < 0 {
		return bad("EagerMax %d", c.EagerMax)
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = DefaultMaxBuffered
	}
	if c.MaxBuffered < msgOverhead || c.MaxBuffered > maxRegion {
		return bad("MaxBuffered %d outside [%d, %d]", c.MaxBuffered, msgOverhead, maxRegion)
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(c.PeerTimeout/4, DefaultHeartbeatInterval)
	}
	if c.PeerTimeout < 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.PeerTimeout/3 {
		return bad("HeartbeatInterval %v for PeerTimeout %v (want 0 < interval <= timeout/3)", c.HeartbeatInterval, c.PeerTimeout)
	}
	if n, err := cmaMinFromEnv(c.CMAMin); err != nil {
		return bad("%v", err)
	} else {
		c.CMAMin = n
	}
	if c.CMAMin == 0 {
		c.CMAMin, c.cmaAuto = DefaultCMAMin, true
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.HandshakeTimeout < 0 {
		return bad("HandshakeTimeout %v", c.HandshakeTimeout)
	}
	return c, nil
}

// peers fills in Peers (a copy; nil: every other rank) and reports
// whether they are other ranks in increasing order.
func (c *Config) peers() bool {
	if c.Peers == nil {
		for r := range c.Size {
			if r != c.Rank {
				c.Peers = append(c.Peers, r)
			}
		}
	}
	c.Peers = slices.Clone(c.Peers)
	for i, r := range c.Peers {
		if r < 0 || r >= c.Size || r == c.Rank || (i > 0 && r <= c.Peers[i-1]) {
			return false
		}
	}
	return true
}
