package shm

import (
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Defaults of Config's limits.
const (
	DefaultSlotSize = 1 << 20 // a ring chunk (algo's DefaultNetChunkBytes) in one slot
	// DefaultEagerMax is capped by the pair's SlotSize.
	DefaultEagerMax    = msg.DefaultEagerMax
	DefaultMaxBuffered = msg.DefaultMaxBuffered
	MinSecret          = msg.MinSecret
	DefaultSlots       = 16

	// Liveness and handshake: the defaults every carrier shares.
	DefaultPeerTimeout       = msg.DefaultPeerTimeout
	DefaultHeartbeatInterval = msg.DefaultHeartbeatInterval
	DefaultHandshakeTimeout  = msg.DefaultHandshakeTimeout

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
	// Peers are the ranks this rank links to (nil: every other rank). A
	// rank listed here must list this one.
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

// normalize checks c and fills in the defaults: the shared ones through
// msg.Common (Peers come back sorted), then the rings' and single copy's.
func (c Config) normalize() (Config, error) {
	com := msg.Common{Rank: c.Rank, Size: c.Size, Secret: c.Secret, Peers: c.Peers}
	com.EagerMax, com.MaxBuffered = c.EagerMax, c.MaxBuffered
	com.PeerTimeout, com.HeartbeatInterval, com.HandshakeTimeout = c.PeerTimeout, c.HeartbeatInterval, c.HandshakeTimeout
	com, err := com.Normalize("shm", maxRegion)
	if err != nil {
		return c, err
	}
	c.Secret, c.Peers = com.Secret, com.Peers
	c.EagerMax, c.MaxBuffered = com.EagerMax, com.MaxBuffered
	c.PeerTimeout, c.HeartbeatInterval, c.HandshakeTimeout = com.PeerTimeout, com.HeartbeatInterval, com.HandshakeTimeout
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("shm: rank %d: config: %w: %s", c.Rank, transport.ErrBadArgument, fmt.Sprintf(format, a...))
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
	if n, err := cmaMinFromEnv(c.CMAMin); err != nil {
		return bad("%v", err)
	} else {
		c.CMAMin = n
	}
	if c.CMAMin == 0 {
		c.CMAMin, c.cmaAuto = DefaultCMAMin, true
	}
	return c, nil
}
