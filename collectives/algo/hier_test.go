package algo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// layout is a fake assignment of in-process ranks to hosts.
type layout struct {
	name  string
	hosts []string
	even  bool // every host holds the same number of ranks
}

var hierLayouts = []layout{
	{"2x2", []string{"a", "a", "b", "b"}, true},
	{"2x2-interleaved", []string{"a", "b", "a", "b"}, true},
	{"2x4", []string{"a", "a", "a", "a", "b", "b", "b", "b"}, true},
	{"3x2", []string{"a", "a", "b", "b", "c", "c"}, true},
	{"3+1", []string{"a", "a", "b", "a"}, false},
}

func topologyOf(t testing.TB, hosts []string) *algo.Topology {
	t.Helper()
	topo, err := algo.NewTopology(hosts)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// watch is what the ranks' watched transports saw: the bytes of data
// (not of the match: steps from 128 up) each host sent to other hosts, and whether a message carried a step of a
// hierarchical level (steps from 1<<12 up: the algorithm ran in levels).
type watch struct {
	hosts   []string
	cross   map[string]*atomic.Int64
	leveled atomic.Bool
}

func newWatch(hosts []string) *watch {
	w := &watch{hosts: hosts, cross: map[string]*atomic.Int64{}}
	for _, h := range hosts {
		w.cross[h] = new(atomic.Int64)
	}
	return w
}

// crossBytes is the sum over hosts of the bytes sent across.
func (w *watch) crossBytes() int64 {
	var s int64
	for _, c := range w.cross {
		s += c.Load()
	}
	return s
}

// watched is a rank's transport as the algorithms see it, noting each
// Send in its watch. It has no PeerAccess (watchedPA adds it back).
type watched struct {
	transport.Transport
	w *watch
}

func (t watched) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	me := t.w.hosts[t.Rank()]
	payload := tag.Step&(transport.MaxStep-1) >= 128 // not the match's
	if payload && dst >= 0 && dst < len(t.w.hosts) && t.w.hosts[dst] != me {
		t.w.cross[me].Add(int64(len(data)))
	}
	if tag.Step&(transport.MaxStep-1) >= 1<<12 {
		t.w.leveled.Store(true)
	}
	return t.Transport.Send(ctx, dst, tag, data)
}

type watchedPA struct {
	watched
	pa transport.PeerAccess
}

func (t watchedPA) Expose(ctx context.Context, tag transport.Tag, bufs ...[]byte) (transport.Window, error) {
	return t.pa.Expose(ctx, tag, bufs...)
}

// watchedLocal is n in-process ranks (message path when plain) on hosts,
// all watched by w.
func watchedLocal(hosts []string, plain bool, w *watch) []transport.Transport {
	ts := transport.NewLocal(len(hosts))
	for r, tr := range ts {
		wt := watched{tr, w}
		ts[r] = wt
		if !plain {
			ts[r] = watchedPA{wt, tr.(transport.PeerAccess)}
		}
	}
	return ts
}

// kindCase is one collective on given inputs: run calls it on one rank
// and returns that rank's output.
type kindCase struct {
	kind    algo.Kind
	inPlace bool
}

var hierKinds = []kindCase{
	{algo.KindAllReduce, false}, {algo.KindAllReduce, true},
	{algo.KindAllGather, false}, {algo.KindAllGather, true},
	{algo.KindReduceScatter, false}, {algo.KindReduceScatter, true},
	{algo.KindBroadcast, false},
}

func (k kindCase) String() string {
	if k.inPlace {
		return k.kind.String() + "-inplace"
	}
	return k.kind.String()
}

// runKind runs k on every rank of ts with inputs (one per rank) and
// returns the outputs.
func runKind(t testing.TB, ts []transport.Transport, k kindCase, d algo.Desc, inputs [][]byte, opts []algo.Option) ([][]byte, error) {
	n, es := len(ts), d.DType.Size()
	outs := make([][]byte, n)
	errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
		in := bytes.Clone(inputs[r])
		switch k.kind {
		case algo.KindAllReduce:
			outs[r] = make([]byte, len(in))
			if k.inPlace {
				outs[r] = in
			}
			return algo.AllReduce(ctx, tr, d, in, outs[r], opts...)
		case algo.KindAllGather:
			outs[r] = make([]byte, n*len(in))
			if k.inPlace {
				copy(outs[r][r*len(in):], in)
				in = outs[r][r*len(in) : (r+1)*len(in)]
			}
			return algo.AllGather(ctx, tr, d, in, outs[r], opts...)
		case algo.KindReduceScatter:
			lo, hi := algo.BlockRange(d.Count, n, r)
			outs[r] = make([]byte, (hi-lo)*es)
			if k.inPlace {
				outs[r] = in[lo*es : hi*es]
			}
			return algo.ReduceScatter(ctx, tr, d, in, outs[r], opts...)
		default:
			outs[r] = in
			return algo.Broadcast(ctx, tr, d, in, opts...)
		}
	})
	return outs, firstErr(errs)
}

// expected checks outs of k against the reference of the inputs.
func expected(k kindCase, d algo.Desc, inputs [][]byte, outs [][]byte) error {
	n := len(inputs)
	for r, out := range outs {
		var err error
		switch k.kind {
		case algo.KindAllReduce:
			err = check(d.DType, out, reference(d.DType, d.Op, inputs, d.Count))
		case algo.KindAllGather:
			if !bytes.Equal(out, bytes.Join(inputs, nil)) {
				err = errors.New("wrong gather")
			}
		case algo.KindReduceScatter:
			lo, hi := algo.BlockRange(d.Count, n, r)
			err = check(d.DType, out, reference(d.DType, d.Op, inputs, d.Count).slice(d.DType, lo, hi))
		default:
			if !bytes.Equal(out, inputs[d.Root]) {
				err = errors.New("wrong data")
			}
		}
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
		if k.kind == algo.KindAllReduce && !bytes.Equal(out, outs[0]) {
			return fmt.Errorf("rank %d's result differs from rank 0's", r)
		}
	}
	return nil
}

func reduces(k algo.Kind) bool { return k == algo.KindAllReduce || k == algo.KindReduceScatter }

// exactOp reports whether the reduction of d has one right answer in
// every order: integers (wrapping), min and max.
func exactOp(d algo.Desc) bool {
	return !reduces(d.Kind) || !d.DType.IsFloat() || d.Op == reduce.Min || d.Op == reduce.Max
}

// TestHierMatrix runs every op the hierarchical algorithms serve, every
// dtype and reduce op, at counts that are not multiples of the rank count
// (and below it), on every layout, in levels (the message path picked by
// Auto with no size threshold, and forced on the PeerAccess path), and
// compares each with the flat ring run on the same inputs: bitwise where
// the result is one in every order (integers, min, max, gathers,
// broadcasts), else against the float64 reference; every rank of an
// all-reduce gets the same bits. The uneven layout takes the flat
// algorithms for all but broadcast, and the watch proves which ran. The
// plain run takes each layout one way (Auto and forced in turn);
// CHOREO_TEST_FULL=1 both ways.
func TestHierMatrix(t *testing.T) {
	counts := []int{0, 1, 13, 1001}
	for li, lay := range hierLayouts {
		for _, plain := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/plain=%v", lay.name, plain), func(t *testing.T) {
				testenv.Sliced(t, plain == (li%2 == 0))
				t.Parallel()
				topo := topologyOf(t, lay.hosts)
				n := len(lay.hosts)
				i, fails := 0, 0
				for _, k := range hierKinds {
					for _, dt := range gpu.DTypes {
						for _, count := range counts {
							ops := reduce.Ops
							if !reduces(k.kind) {
								ops = ops[:1]
							}
							for _, op := range ops {
								i++
								d := algo.Desc{Kind: k.kind, Group: 5, Seq: uint64(i), DType: dt, Count: count, Op: op, Root: i % n}
								if err := hierCase(t, lay, topo, plain, k, d); err != nil {
									t.Errorf("%s %s %s count=%d root=%d: %v", k, dt, op, count, d.Root, err)
									if fails++; fails > 5 {
										t.FailNow()
									}
								}
							}
						}
					}
				}
			})
		}
	}
}

func hierCase(t *testing.T, lay layout, topo *algo.Topology, plain bool, k kindCase, d algo.Desc) error {
	n := len(lay.hosts)
	inputs := make([][]byte, n)
	for r := range inputs {
		inputs[r] = gen(d.DType, d.Op, d.Count, r, d.Seq)
	}
	// Small chunks and parts: many of each at 1001 elements.
	opts := []algo.Option{algo.WithTopology(topo), algo.WithChunkBytes(96), algo.WithHierPartBytes(1000)}
	if plain {
		opts = append(opts, algo.WithHierBytes(-1)) // Auto, whatever the size
	} else {
		opts = append(opts, algo.WithAlgorithm(algo.Hierarchical))
	}
	w := newWatch(lay.hosts)
	ts := watchedLocal(lay.hosts, plain, w)
	defer closeAll(ts)
	hier, err := runKind(t, ts, k, d, inputs, opts)
	if err != nil {
		return fmt.Errorf("levels: %w", err)
	}
	// (an empty payload sends nothing in levels: no step to see)
	// Auto never takes the levels for broadcast; forced, it runs them on
	// any topology that spans hosts.
	want := lay.even || k.kind == algo.KindBroadcast
	if plain && k.kind == algo.KindBroadcast {
		want = false
	}
	if d.Count > 0 && w.leveled.Load() != want {
		return fmt.Errorf("ran in levels: %v, want %v", w.leveled.Load(), want)
	}
	if err := expected(k, d, inputs, hier); err != nil {
		return fmt.Errorf("levels: %w", err)
	}
	flatTs := local(n, true)
	defer closeAll(flatTs)
	flat, err := runKind(t, flatTs, k, d, inputs, []algo.Option{algo.WithAlgorithm(algo.Ring), algo.WithChunkBytes(96)})
	if err != nil {
		return fmt.Errorf("flat: %w", err)
	}
	if exactOp(d) {
		for r := range hier {
			if !bytes.Equal(hier[r], flat[r]) {
				return fmt.Errorf("rank %d: levels and flat ring differ", r)
			}
		}
	}
	return nil
}

// TestHierLarge: payloads of many chunks in both ring directions, on the
// default chunk sizes, half types included.
func TestHierLarge(t *testing.T) {
	const count = 300_001
	cases := []struct {
		lay layout
		k   kindCase
		dt  gpu.DType
		op  reduce.Op
	}{
		{hierLayouts[2], hierKinds[0], gpu.Float32, reduce.Sum},
		{hierLayouts[3], hierKinds[1], gpu.BFloat16, reduce.Sum},
		{hierLayouts[0], hierKinds[4], gpu.Int64, reduce.Prod},
		{hierLayouts[1], hierKinds[2], gpu.Float16, reduce.Max},
		{hierLayouts[2], hierKinds[6], gpu.Int8, reduce.Sum},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s/%s/%s/%s", c.lay.name, c.k, c.dt, c.op), func(t *testing.T) {
			n := len(c.lay.hosts)
			d := algo.Desc{Kind: c.k.kind, Group: 6, Seq: uint64(i + 1), DType: c.dt, Count: count, Op: c.op, Root: n - 1}
			inputs := make([][]byte, n)
			for r := range inputs {
				inputs[r] = gen(c.dt, c.op, count, r, d.Seq)
			}
			w := newWatch(c.lay.hosts)
			ts := watchedLocal(c.lay.hosts, true, w)
			defer closeAll(ts)
			opts := []algo.Option{algo.WithTopology(topologyOf(t, c.lay.hosts))}
			if c.k.kind != algo.KindAllReduce {
				// Auto keeps these flat at this size (or always: broadcast)
				opts = append(opts, algo.WithAlgorithm(algo.Hierarchical))
			}
			outs, err := runKind(t, ts, c.k, d, inputs, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !w.leveled.Load() {
				t.Fatal("did not run in levels")
			}
			if err := expected(c.k, d, inputs, outs); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHierSelection: Auto takes the levels only above the threshold of
// the collective (DefaultHierBytes for all-reduce, DefaultHierGatherBytes
// for all-gather and reduce-scatter; never for broadcast), over message
// transports, where the topology allows them.
func TestHierSelection(t *testing.T) {
	cases := []struct {
		name   string
		hosts  []string
		kind   algo.Kind
		count  int // float32 elements
		plain  bool
		levels bool
	}{
		{"small-allreduce", []string{"a", "a", "b", "b"}, algo.KindAllReduce, algo.DefaultHierBytes / 4, true, false},
		{"large-allreduce", []string{"a", "a", "b", "b"}, algo.KindAllReduce, algo.DefaultHierBytes/4 + 1, true, true},
		{"small-broadcast", []string{"a", "a", "b", "b"}, algo.KindBroadcast, 1000, true, false},
		{"large-broadcast", []string{"a", "a", "b", "b"}, algo.KindBroadcast, algo.DefaultHierGatherBytes/4 + 1, true, false},
		{"mid-allgather", []string{"a", "b", "a", "b"}, algo.KindAllGather, algo.DefaultHierGatherBytes / 4, true, false},
		{"large-allgather", []string{"a", "b", "a", "b"}, algo.KindAllGather, algo.DefaultHierGatherBytes/4 + 1, true, true},
		{"mid-reducescatter", []string{"a", "a", "b", "b"}, algo.KindReduceScatter, algo.DefaultHierGatherBytes / 4, true, false},
		{"large-reducescatter", []string{"a", "a", "b", "b"}, algo.KindReduceScatter, algo.DefaultHierGatherBytes/4 + 1, true, true},
		{"one-host", []string{"a", "a", "a", "a"}, algo.KindAllReduce, 1 << 17, true, false},
		{"one-rank-per-host", []string{"a", "b", "c", "d"}, algo.KindAllReduce, 1 << 17, true, false},
		{"uneven-allreduce", []string{"a", "a", "b", "a"}, algo.KindAllReduce, 1 << 17, true, false},
		{"uneven-broadcast", []string{"a", "a", "b", "a"}, algo.KindBroadcast, 1 << 17, true, false},
		{"peer-access", []string{"a", "a", "b", "b"}, algo.KindAllReduce, 1 << 17, false, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWatch(c.hosts)
			ts := watchedLocal(c.hosts, c.plain, w)
			defer closeAll(ts)
			d := algo.Desc{Kind: c.kind, Group: 8, Seq: uint64(i + 1), DType: gpu.Float32, Count: c.count, Op: reduce.Sum, Root: 1}
			inputs := make([][]byte, len(c.hosts))
			for r := range inputs {
				inputs[r] = gen(d.DType, d.Op, d.Count, r, d.Seq)
			}
			k := kindCase{kind: c.kind}
			outs, err := runKind(t, ts, k, d, inputs, []algo.Option{algo.WithTopology(topologyOf(t, c.hosts))})
			if err != nil {
				t.Fatal(err)
			}
			if err := expected(k, d, inputs, outs); err != nil {
				t.Fatal(err)
			}
			if w.leveled.Load() != c.levels {
				t.Fatalf("ran in levels: %v, want %v", w.leveled.Load(), c.levels)
			}
		})
	}
}

// TestHierCrossHostBytes: on 2 hosts of 4 ranks, the all-reduce in levels
// sends each host's share of the vector across once each way (2(m-1)/m of
// it, m = 2 hosts: the vector's size), where the flat ring crosses with
// 2(n-1)/n of it at each of its two crossings per host (1.75 times as
// much). The bytes are counted, not timed.
func TestHierCrossHostBytes(t *testing.T) {
	hosts := hierLayouts[2].hosts
	const count = 1<<16 + 3
	size := int64(count * 4)
	d := algo.Desc{Kind: algo.KindAllReduce, Group: 9, Seq: 1, DType: gpu.Float32, Count: count, Op: reduce.Sum}
	inputs := make([][]byte, len(hosts))
	for r := range inputs {
		inputs[r] = gen(d.DType, d.Op, count, r, 1)
	}
	run := func(opts ...algo.Option) int64 {
		w := newWatch(hosts)
		ts := watchedLocal(hosts, true, w)
		defer closeAll(ts)
		outs, err := runKind(t, ts, hierKinds[0], d, inputs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := expected(hierKinds[0], d, inputs, outs); err != nil {
			t.Fatal(err)
		}
		return w.crossBytes()
	}
	levels := run(algo.WithTopology(topologyOf(t, hosts)))
	flat := run(algo.WithAlgorithm(algo.Ring))
	if levels != 2*size {
		t.Errorf("levels sent %d bytes across hosts, want %d (the vector once per host)", levels, 2*size)
	}
	if 10*flat < 17*levels {
		t.Errorf("flat ring sent %d bytes across, levels %d: want about 1.75 times as many", flat, levels)
	}
	t.Logf("bytes across hosts: levels %d, flat ring %d (%.2fx)", levels, flat, float64(flat)/float64(levels))
}

// TestHierMismatch: ranks whose topologies group them differently, or a
// rank without one, fail with ErrMismatch instead of exchanging with the
// wrong peers.
func TestHierMismatch(t *testing.T) {
	other := [][]string{{"a", "b", "a", "b"}, nil}
	for _, odd := range other {
		t.Run(fmt.Sprint(odd), func(t *testing.T) {
			ts := local(4, true)
			defer closeAll(ts)
			errs := onRanks(t, ts, failTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				topo := topologyOf(t, []string{"a", "a", "b", "b"})
				if r == 3 {
					topo = nil
					if odd != nil {
						topo = topologyOf(t, odd)
					}
				}
				d := algo.Desc{Kind: algo.KindAllReduce, Group: 10, Seq: 1, DType: gpu.Float32, Count: 1000, Op: reduce.Sum}
				return call(ctx, tr, d, algo.WithTopology(topo), algo.WithHierBytes(-1))
			})
			for r, err := range errs {
				if !errors.Is(err, algo.ErrMismatch) || errors.Is(err, transport.ErrTimeout) {
					t.Errorf("rank %d: got %v, want ErrMismatch (not the deadline)", r, err)
				}
			}
		})
	}
}

// TestHierPeerLost: a rank that leaves during an all-reduce in levels
// makes every other rank, on its host and on the other one, fail with
// ErrPeerLost (directly, or as the cause of the abort of a rank that
// lost it), not the deadline.
func TestHierPeerLost(t *testing.T) {
	hosts := hierLayouts[0].hosts
	for _, gone := range []int{1, 3} {
		t.Run(fmt.Sprintf("rank%d", gone), func(t *testing.T) {
			ts := local(len(hosts), true)
			defer closeAll(ts)
			topo := topologyOf(t, hosts)
			errs := onRanks(t, ts, failTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				if r == gone {
					time.Sleep(20 * time.Millisecond)
					return tr.Close()
				}
				d := algo.Desc{Kind: algo.KindAllReduce, Group: 11, Seq: 1, DType: gpu.Float32, Count: 1 << 18, Op: reduce.Sum}
				return call(ctx, tr, d, algo.WithTopology(topo))
			})
			for r, err := range errs {
				if r == gone {
					continue
				}
				if !errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrTimeout) {
					t.Errorf("rank %d: got %v, want ErrPeerLost (not the deadline)", r, err)
				}
			}
		})
	}
}

// TestHierSlowRank is TestHierPeerLost's twin: a rank that comes late but
// alive (on either host) delays the collective and fails nobody.
func TestHierSlowRank(t *testing.T) {
	hosts := hierLayouts[0].hosts
	topo := topologyOf(t, hosts)
	for _, slow := range []int{1, 3} {
		ts := local(len(hosts), true)
		d := algo.Desc{Kind: algo.KindAllReduce, Group: 12, Seq: 1, DType: gpu.Float32, Count: 1 << 18, Op: reduce.Sum}
		inputs := make([][]byte, len(hosts))
		for r := range inputs {
			inputs[r] = gen(d.DType, d.Op, d.Count, r, 1)
		}
		outs := make([][]byte, len(hosts))
		errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			if r == slow {
				time.Sleep(500 * time.Millisecond)
			}
			outs[r] = make([]byte, len(inputs[r]))
			return algo.AllReduce(ctx, tr, d, inputs[r], outs[r], algo.WithTopology(topo))
		})
		closeAll(ts)
		noErrors(t, fmt.Sprintf("slow rank %d", slow), errs)
		if err := expected(hierKinds[0], d, inputs, outs); err != nil {
			t.Fatalf("slow rank %d: %v", slow, err)
		}
	}
}
