package algo

// Algorithm picks how a collective moves its bytes.
type Algorithm uint8

// The algorithms. Auto takes Direct on transports with PeerAccess; on
// others, Hierarchical for all-reduce, all-gather and reduce-scatter
// payloads above their HierBytes threshold where the group's Topology
// allows it (see Hierarchical; never for broadcast), else Doubling for
// all-reduce payloads up to Options.SmallBytes and Ring above (tree for
// broadcast). Doubling applies
// to all-reduce only; other collectives treat it as Ring. Direct requires
// PeerAccess.
const (
	Auto Algorithm = iota
	Ring
	Doubling
	Direct
	// DeviceResident names the device-resident data path (kernels on the
	// ranks' GPU streams read each other's device buffers) in match
	// signatures: the collectives package runs it, algo matches it
	// (MatchDevice), so a rank on it meets a rank on a host path with
	// ErrMismatch rather than a hang.
	DeviceResident
	// Engine names the engine data path (a vendor library such as NCCL
	// moves the bytes on the device) in match signatures, as
	// DeviceResident does for its path.
	Engine
	// Hierarchical runs all-reduce, all-gather, reduce-scatter and
	// broadcast in two levels, inside each host and across hosts, over
	// Options.Topology (hier.go). It needs a topology that spans more than
	// one host with more than one rank on some host, and, except for
	// broadcast, the same number of ranks on every host; where the
	// topology does not allow it, a forced Hierarchical runs what Auto
	// picks without it. Forced, it ignores HierBytes and PeerAccess, and
	// runs broadcast in levels too, which Auto never does: with the ranks
	// of a host numbered together, the flat binomial tree already sends
	// each byte across to each other host about once, and the levels only
	// add a step.
	Hierarchical
)

func (a Algorithm) String() string {
	switch a {
	case Auto:
		return "auto"
	case Ring:
		return "ring"
	case Doubling:
		return "doubling"
	case Direct:
		return "direct"
	case DeviceResident:
		return "device"
	case Engine:
		return "engine"
	case Hierarchical:
		return "hierarchical"
	}
	return "algorithm(?)"
}

// Defaults, where BenchmarkCrossover (in-process ranks) puts the crossovers:
// doubling is the faster all-reduce up to DefaultSmallBytes, the ring
// above; the whole-vector direct all-reduce is the faster up to
// DefaultDirectSmallBytes, the sliced one above. A network transport, with
// a higher per-message cost, may want a different SmallBytes: measure it
// there.
const (
	// DefaultSmallBytes: message-transport all-reduces up to this size use
	// recursive doubling, larger ones the ring.
	DefaultSmallBytes = 256 << 10
	// DefaultDirectSmallBytes: direct all-reduces up to this size have every
	// rank reduce the whole vector (two barriers, no slicing).
	DefaultDirectSmallBytes = 16 << 10
	// DefaultChunkBytes: the ring's pipelining unit over PeerAccess
	// transports (in-process ranks).
	DefaultChunkBytes = 128 << 10
	// DefaultNetChunkBytes: the ring's pipelining unit over message
	// transports (TCP), where each message costs syscalls, wake-ups and a
	// round trip before its bytes move: larger chunks spend less per byte.
	DefaultNetChunkBytes = 1 << 20
	// DefaultHierBytes: with a Topology that allows it, payloads above this
	// size (per rank: the input of all-reduce, reduce-scatter and
	// all-gather, the buffer of broadcast) take the hierarchical
	// algorithms. Below it latency dominates: the flat all-reduce is then
	// recursive doubling (log2 n exchanges), which the two levels' ring
	// steps cannot match, and the inter-host bytes the two levels save
	// take less time than their extra phase's round trips.
	DefaultHierBytes = DefaultSmallBytes
	// DefaultHierGatherBytes: the same threshold for all-gather and
	// reduce-scatter (the input of either, per rank). Unlike the
	// all-reduce, they run their two levels one after the other, not
	// pipelined, so the levels pay only where the bytes saved across hosts
	// outweigh a whole extra phase: between hosts capped at 10 Gbit/s, 2
	// hosts of 4 ranks, the levels' reduce-scatter ran at half the flat
	// ring's bus bandwidth at 1 MiB and 1.1-1.35x at 64 MiB.
	DefaultHierGatherBytes = 16 << 20
)

// Options tune the algorithms. Every rank of a group must use the same
// options (the match checks the resulting choice, so a difference fails
// with ErrMismatch rather than hanging). The zero value means defaults.
type Options struct {
	Algorithm        Algorithm
	SmallBytes       int
	DirectSmallBytes int
	ChunkBytes       int
	// Topology is where the group's ranks live (nil: unknown); the
	// hierarchical algorithms use it. Its Size must be the group's.
	Topology *Topology
	// HierBytes: all-reduce, all-gather and reduce-scatter payloads above
	// it may take Hierarchical under Auto (0: the defaults,
	// DefaultHierBytes for all-reduce and DefaultHierGatherBytes for the
	// other two; negative: every payload may). Broadcast never does.
	HierBytes int
	// hierPart: the part size of an all-reduce in levels (0:
	// hierPartBytes); tests set it to cut small payloads.
	hierPart int
}

// Option sets one field of Options.
type Option func(*Options)

// WithAlgorithm forces an algorithm.
func WithAlgorithm(a Algorithm) Option { return func(o *Options) { o.Algorithm = a } }

// WithSmallBytes sets both small-payload thresholds (SmallBytes and
// DirectSmallBytes) in bytes (0: default; negative: never small).
func WithSmallBytes(n int) Option {
	return func(o *Options) { o.SmallBytes, o.DirectSmallBytes = n, n }
}

// WithDirectSmallBytes sets DirectSmallBytes alone.
func WithDirectSmallBytes(n int) Option { return func(o *Options) { o.DirectSmallBytes = n } }

// WithChunkBytes sets the ring chunk size in bytes (0: default,
// DefaultChunkBytes over PeerAccess, DefaultNetChunkBytes over messages).
func WithChunkBytes(n int) Option { return func(o *Options) { o.ChunkBytes = n } }

// WithTopology gives the algorithms the group's topology (every rank the
// same). A group of collectives takes it from collectives.WithHosts.
func WithTopology(t *Topology) Option { return func(o *Options) { o.Topology = t } }

// WithHierBytes sets HierBytes (0: the defaults; negative: no payload is
// too small for the hierarchical algorithms).
func WithHierBytes(n int) Option { return func(o *Options) { o.HierBytes = n } }

// WithOptions copies a whole Options value.
func WithOptions(opts Options) Option { return func(o *Options) { *o = opts } }

func buildOptions(opts []Option) Options {
	var o Options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.SmallBytes == 0 {
		o.SmallBytes = DefaultSmallBytes
	}
	if o.DirectSmallBytes == 0 {
		o.DirectSmallBytes = DefaultDirectSmallBytes
	}
	return o
}

// chunkDefault fills in the default chunk size for a transport with
// (peerAccess) or without PeerAccess.
func (o *Options) chunkDefault(peerAccess bool) {
	if o.ChunkBytes > 0 {
		return
	}
	o.ChunkBytes = DefaultChunkBytes
	if !peerAccess {
		o.ChunkBytes = DefaultNetChunkBytes
	}
}
