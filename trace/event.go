package trace

// Kind is how an event shows on its track.
type Kind uint8

// The kinds of event.
const (
	// Span is a slice of time on a track that holds one activity at a
	// time (a stream): spans of one track nest or follow each other.
	Span Kind = iota + 1
	// Async is a slice of time that may overlap others of its track (a
	// transport send or receive); Perfetto lays those out in rows.
	Async
	// Instant is a point in time.
	Instant
)

// Word says which fence word a flow travels through: the GPU word carries
// a GPU-side update to a CPU-side wait, the CPU word a CPU-side update to a
// GPU-side wait.
type Word uint8

// The fence words.
const (
	GPUWord Word = iota + 1
	CPUWord
)

// Flow is an event's end of a flow arrow.
type Flow uint8

// The ends of a flow.
const (
	NoFlow Flow = iota
	// FlowOut: the event is a fence update; the arrow starts at FlowTS.
	FlowOut
	// FlowIn: the event is the fence wait the update released; the arrow
	// ends at FlowTS.
	FlowIn
)

// Note describes a fence command a GPU stream runs: its name on the
// timeline and the flow it is an end of. The zero Note names nothing.
type Note struct {
	Name  string
	Fence uint64
	Value uint32
	Word  Word
	Flow  Flow
}

// Event is one recorded event. Times are nanoseconds since the tracer's
// epoch on the monotonic clock. Fields that do not apply are zero (Peer
// is -1 when there is no peer). An event holds no pointer into the code
// that recorded it: strings are the recorder's constants or names that
// outlive the trace.
type Event struct {
	Kind  Kind
	Track string // the stream or lane: one track per name and rank
	Name  string
	Cat   string // what recorded it: "gpu", "comm", "fence", "transport"
	TS    int64
	Dur   int64

	Fence  uint64
	Value  uint32
	Word   Word
	Flow   Flow
	FlowTS int64 // where the flow's end sits, inside the span

	Group, Seq uint64
	Peer       int
	Via        string // a transport call's link to Peer ("shm", "tcp")
	Bytes      int64
	Count      int // commands of a GPU stream batch, or parts of a task
	Err        string

	// Enqueued and Submitted are when a GPU command was enqueued on its
	// stream and handed to the backend's queue (0: not known).
	Enqueued, Submitted int64
}

// End is when the event ends.
func (e Event) End() int64 { return e.TS + e.Dur }
