package algo

// Algorithm picks how a collective moves its bytes.
type Algorithm uint8

// The algorithms. Auto takes Direct on transports with PeerAccess; on
// others, Doubling for all-reduce payloads up to Options.SmallBytes and Ring
// above (tree for broadcast). Doubling applies to all-reduce only; other
// collectives treat it as Ring. Direct requires PeerAccess.
const (
	Auto Algorithm = iota
	Ring
	Doubling
	Direct
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
	}
	return "algorithm(?)"
}

// Defaults, chosen by measurement (see the package benchmarks).
const (
	// DefaultSmallBytes: all-reduce payloads up to this size take the
	// latency-optimal algorithm (recursive doubling, or the one-phase direct
	// variant).
	DefaultSmallBytes = 64 << 10
	// DefaultChunkBytes: the ring's pipelining unit.
	DefaultChunkBytes = 128 << 10
)

// Options tune the algorithms. Every rank of a group must use the same
// options (the match checks the resulting choice, so a difference fails
// with ErrMismatch rather than hanging). The zero value means defaults.
type Options struct {
	Algorithm  Algorithm
	SmallBytes int
	ChunkBytes int
}

// Option sets one field of Options.
type Option func(*Options)

// WithAlgorithm forces an algorithm.
func WithAlgorithm(a Algorithm) Option { return func(o *Options) { o.Algorithm = a } }

// WithSmallBytes sets the small-payload threshold in bytes (0: default;
// negative: never small).
func WithSmallBytes(n int) Option { return func(o *Options) { o.SmallBytes = n } }

// WithChunkBytes sets the ring chunk size in bytes (0: default).
func WithChunkBytes(n int) Option { return func(o *Options) { o.ChunkBytes = n } }

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
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	return o
}
