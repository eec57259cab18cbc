package collectives

import (
	"time"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/metrics"
	"github.com/choreo-gpu/choreo/trace"
)

// Op is a reduction operator.
type Op = reduce.Op

// The reduce ops.
const (
	Sum  = reduce.Sum
	Prod = reduce.Prod
	Min  = reduce.Min
	Max  = reduce.Max
)

// ParseOp turns "sum", "prod", "min" or "max" into an Op.
func ParseOp(s string) (Op, error) { return reduce.ParseOp(s) }

// config holds a group's settings.
type config struct {
	timeout  time.Duration
	maxBytes int
	algo     []algo.Option
	trace    func(TraceEvent)
	tracer   *trace.Tracer
	// rec is the rank's Recorder, set by newGroup from tracer; a group
	// Split from a traced one keeps its parent's (its transport is traced
	// already, and its ranks are the parent's).
	rec      *trace.Recorder
	metrics  *metrics.Metrics
	datapath DataPath
	// processes: the group's ranks live in separate processes (NewJoined
	// made it), so the device path meets its peers over IPC (deviceipc.go).
	processes bool
	dev       gpu.Device // this rank's device (WithDevice), for DataPathAuto
	hosts     []string   // WithHosts's: each rank's host identity
	// name: the group's name (WithName's, else derived: metrics.go).
	name string
	// rejoiner grows the group back (grow.go); nil: it does not grow.
	rejoiner Rejoiner
	// epoch: WithEpoch's, the epoch of a group that joins a running world.
	epoch uint64
}

// WithName names the group: the group label of its metrics, and the prefix
// of the names of the groups Split makes from it. Every rank must pass the
// same name, and groups that report to one endpoint at once should have
// different ones. Without it the name is derived, the same on every rank
// and in every run of the same program (Group.Name says how).
func WithName(name string) Option { return func(c *config) { c.name = name } }

// TraceEvent reports one finished collective: which, on which rank, the
// fence's (side, op, value) sequence, how long it took and its error.
type TraceEvent struct {
	Op       string
	Rank     int
	Seq      uint64
	HasEvent bool
	Steps    []fence.Step
	Elapsed  time.Duration
	Err      error
}

// Option configures a group.
type Option func(*config)

// WithTimeout bounds every collective of the group (default 30 s): a
// collective not done by then fails on this rank with ErrTimeout and aborts
// on the others.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithMaxBytes refuses payloads over n bytes per rank (ErrTooLarge on the
// rank that passed it; the peers' matching calls fail too). 0 means no
// limit.
func WithMaxBytes(n int) Option { return func(c *config) { c.maxBytes = n } }

// WithAlgorithm passes options to the algorithms (algorithm choice,
// small-payload threshold, ring chunk size). Every rank must use the same.
func WithAlgorithm(opts ...algo.Option) Option {
	return func(c *config) { c.algo = append(c.algo, opts...) }
}

// WithOpHook calls fn once after each collective of the group finishes
// (its outcome, in a TraceEvent), from the rank's communication stream; fn
// must not block. For a timeline of what the ranks did, see WithTracer.
func WithOpHook(fn func(TraceEvent)) Option { return func(c *config) { c.trace = fn } }

// WithTracer records each rank's choreography (GPU stream commands, comm
// tasks, transport calls, fence waits and updates, failures) into
// tr.Rank(rank); write it with tr.WriteJSON. Without it (or with a nil tr)
// nothing is recorded and the hooks cost a pointer check.
func WithTracer(tr *trace.Tracer) Option { return func(c *config) { c.tracer = tr } }

// CallOption configures one call.
type CallOption func(*callConfig)

type callConfig struct {
	donate bool
}

// Donate lets the output take over the input's buffer: the op runs in
// place, and the caller must not use the input again.
func Donate() CallOption { return func(c *callConfig) { c.donate = true } }
