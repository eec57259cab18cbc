// Randomized API test: many mixed collectives over several groups per rank,
// each rank issuing its sequence from its own goroutine on its own GPU
// stream, and every element of every result checked, bit for bit, against
// a reference the test computes on the CPU.
//
// The short run is part of `go test -race ./...` (and of the sim-staged run
// in .ci/run). It prints its seed; replay a failure with that seed:
//
//	CHOREO_RANDOM_SEED=<seed> go test -race -count=1 -run '^TestRandomCollectives$' -v ./collectives
//
// The long run (20000 steps, a third each for worlds of 2, 3 and 4 ranks):
//
//	CHOREO_RANDOM_OPS=20000 go test -race -count=1 -timeout 3h -run '^TestRandomCollectives$' -v ./collectives
//
// and the same with CHOREO_BACKEND=sim-staged in front. CHOREO_RANDOM_RANKS=3
// runs only the world of 3 ranks. With CHOREO_RANDOM_SEED, CHOREO_RANDOM_OPS
// and CHOREO_RANDOM_RANKS as a failure prints them, a run replays the same
// plan with the same data (the library's own timing may still differ).
//
// Values are chosen so that every result is exact in every dtype: integer
// inputs span their whole range (sums and products wrap, and so does the
// reference); float inputs of sums are small integers, of products integers
// in [-3, 3], of min and max arbitrary bit patterns but NaN and -0; moved
// data (gather, broadcast, send) is random bits, NaNs included. So results
// are compared byte for byte.
package collectives_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

const (
	rndSeedEnv  = "CHOREO_RANDOM_SEED"
	rndOpsEnv   = "CHOREO_RANDOM_OPS"
	rndRanksEnv = "CHOREO_RANDOM_RANKS"

	rndShortSteps = 150              // steps per world in the short run
	rndLargeMin   = 16 << 20         // the short run's large all-reduce: pipelined (>= 16 MiB)
	rndLargeMax   = 18 << 20         //
	rndChainMax   = 4096             // elements of a result that later steps may take as input
	rndChainAge   = 64               // steps: how far back an input may come from
	rndMaxLive    = 9                // groups alive at once
	rndReadTime   = 60 * time.Second // bound of every read
	rndTimeout    = 30 * time.Second // the groups' timeout
)

func rndEnvUint(t *testing.T, name string) (uint64, bool) {
	s := os.Getenv(name)
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v, true
}

func TestRandomCollectives(t *testing.T) {
	seed, ok := rndEnvUint(t, rndSeedEnv)
	if !ok {
		seed = uint64(time.Now().UnixNano())
	}
	total, long := rndEnvUint(t, rndOpsEnv)
	all := []int{2, 3, 4}
	ranks := all
	if v, ok := rndEnvUint(t, rndRanksEnv); ok {
		if v < 1 || v > 16 {
			t.Fatalf("%s=%d: want 1..16", rndRanksEnv, v)
		}
		ranks = []int{int(v)}
	}
	steps := rndShortSteps // per world; the same whichever worlds run, so one replays alone
	if long {
		steps = max(1, int(total)/len(all))
	}
	replay := fmt.Sprintf("%s=%d", rndSeedEnv, seed)
	if long {
		replay += fmt.Sprintf(" %s=%d", rndOpsEnv, total)
	}
	if b := testenv.Backend(); b != "sim" {
		replay = "CHOREO_BACKEND=" + b + " " + replay
	}
	const cmd = " go test -race -count=1 -run '^TestRandomCollectives$' -v ./collectives"
	t.Logf("seed %d, %d steps per world, backend %s; replay: %s", seed, steps, testenv.Backend(), replay+cmd)
	// The short run's world with a pipelined all-reduce: of 2 or 3 ranks
	// (the payload is held several times over per rank).
	large := []int{2, 3}[seed%2]
	for _, n := range ranks {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			start := time.Now()
			rndRunWorld(t, rndConfig{seed: seed, n: n, steps: steps, long: long, large: !long && n == large,
				replay: fmt.Sprintf("%s %s=%d%s", replay, rndRanksEnv, n, cmd)})
			t.Logf("seed %d, %d ranks: %d steps in %v", seed, n, steps, time.Since(start).Round(time.Millisecond))
		})
	}
}

// ---- the plan: what every rank does, derived from the seed alone ----

type rndKind uint8

const (
	rkAllReduce rndKind = iota
	rkAllGather
	rkReduceScatter
	rkBroadcast
	rkSendRecv
	rkBarrier
	rkSplit
	rkRetire  // Barrier, Wait, then Close on every member of a subgroup
	rkBadOp   // an all-reduce or reduce-scatter with an invalid op on every rank
	rkBadRoot // a broadcast from a root out of range on every rank
	rkBadPeer // send to / recv from self or out of range: refused at once
)

var rndKindNames = [...]string{"allreduce", "allgather", "reducescatter", "broadcast", "send/recv",
	"barrier", "split", "retire", "allreduce(bad op)", "broadcast(bad root)", "send/recv(bad peer)"}

// rndGen is the class of values an input holds (see the file comment).
type rndGen uint8

const (
	genMove rndGen = iota
	genSum
	genProd
	genMinMax
)

// Per-rank flags of a step.
const (
	flDonate    = 1 << iota // AllReduce with collectives.Donate()
	flFree                  // Free the input right after the launch
	flImpatient             // read the output once with a tiny deadline first
	flCheckIn               // check that the input is unchanged afterwards
)

type rndStep struct {
	idx   int
	kind  rndKind
	group int
	dt    gpu.DType
	shape []int // the input's shape (also Recv's)
	count int
	op    collectives.Op
	gen   rndGen
	seed  uint64 // element values: rndElem(seed, group rank, index)
	chain int    // >= 0: every rank's input is its output of that step instead
	root  int    // Broadcast
	alt   bool   // rkBadOp: as a reduce-scatter
	// nanFreeIn: the chained input holds no NaN.
	nanFreeIn bool
	src       int // SendRecv (group ranks)
	dst       int
	flags     []uint8 // per group rank

	colors, keys []int // Split, per group rank
	newGroup     []int // Split: the plan group each group rank lands in, -1 for none
	sync         *rndRendezvous
	want         error // the sentinel the outputs fail with (error steps)
}

type rndGroup struct {
	members []int // world ranks in group-rank order
	rankOf  []int // world rank -> group rank, -1 if not a member
	parent  int   // -1 for a Local world
	world   bool
	algo    string
}

type rndPlan struct {
	n      int
	groups []*rndGroup
	worlds []int // plan ids of the Local worlds
	opts   [][]collectives.Option
	steps  []*rndStep
}

type rndConfig struct {
	seed   uint64
	n      int
	steps  int
	long   bool
	large  bool // force one large (pipelined) all-reduce
	replay string
}

func (st *rndStep) String() string {
	s := fmt.Sprintf("#%d %s on group %d", st.idx, rndKindNames[st.kind], st.group)
	switch st.kind {
	case rkBarrier, rkRetire:
		return s
	case rkSplit:
		return s + fmt.Sprintf(" colors %v keys %v", st.colors, st.keys)
	}
	s += fmt.Sprintf(" %s %v", st.dt, st.shape)
	switch st.kind {
	case rkAllReduce, rkReduceScatter, rkBadOp:
		s += " op " + st.op.String()
		if st.alt {
			s += " (as a reduce-scatter)"
		}
	case rkBroadcast, rkBadRoot:
		s += fmt.Sprintf(" root %d", st.root)
	case rkSendRecv, rkBadPeer:
		s += fmt.Sprintf(" %d->%d", st.src, st.dst)
	}
	if st.chain >= 0 {
		s += fmt.Sprintf(" input=output of #%d", st.chain)
	}
	return s
}

// outShape is the shape of group rank gr's output.
func (st *rndStep) outShape(p *rndPlan, gr int) []int {
	n := len(p.groups[st.group].members)
	switch st.kind {
	case rkAllGather:
		return append([]int{n}, st.shape...)
	case rkReduceScatter:
		lo, hi := algo.BlockRange(st.count, n, gr)
		return []int{hi - lo}
	}
	return slices.Clone(st.shape)
}

func rndCount(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// rndShape gives count elements a random shape of 1 to 3 dimensions.
func rndShape(rng *rand.Rand, count int) []int {
	if count == 0 {
		k := 1 + rng.IntN(5)
		return [][]int{{0}, {0, k}, {k, 0}, {k, 0, 2}}[rng.IntN(4)]
	}
	if count == 1 && rng.IntN(3) == 0 {
		return [][]int{nil, {}}[rng.IntN(2)] // a scalar
	}
	div := func(c int) int {
		d := 1 + rng.IntN(min(c, 8))
		if c%d != 0 {
			return 1
		}
		return d
	}
	switch rng.IntN(3) {
	case 0:
		return []int{count}
	case 1:
		a := div(count)
		return []int{a, count / a}
	}
	a := div(count)
	b := div(count / a)
	return []int{a, b, count / (a * b)}
}

func rndPickCount(rng *rand.Rand, dt gpu.DType, long bool) int {
	x := rng.Float64()
	switch {
	case x < 0.06:
		return 0
	case x < 0.40:
		return 1 + rng.IntN(16)
	case x < 0.80:
		return 17 + rng.IntN(rndChainMax-16)
	case x < 0.97:
		return rndChainMax + 1 + rng.IntN(64<<10)
	case !long:
		return (256<<10 + rng.IntN(768<<10)) / dt.Size() // up to 1 MiB
	case x < 0.995:
		return (256<<10 + rng.IntN(4<<20)) / dt.Size() // up to 4 MiB
	}
	return (rng.IntN(32<<20) + 1) / dt.Size() // up to 32 MiB, in the long run
}

func rndMakePlan(cfg rndConfig) *rndPlan {
	rng := rand.New(rand.NewPCG(cfg.seed, uint64(cfg.n)))
	p := &rndPlan{n: cfg.n}
	newGroup := func(members []int, parent int, world bool, alg string) int {
		g := &rndGroup{members: members, rankOf: slices.Repeat([]int{-1}, cfg.n), parent: parent, world: world, algo: alg}
		for i, r := range members {
			g.rankOf[r] = i
		}
		p.groups = append(p.groups, g)
		return len(p.groups) - 1
	}
	// Several Local worlds over the same ranks, with different algorithms
	// (the first with the defaults: direct on the in-process transport).
	algos := []struct {
		name string
		opts []algo.Option
	}{
		{"auto", nil},
		{"ring/8KiB", []algo.Option{algo.WithAlgorithm(algo.Ring), algo.WithChunkBytes(8 << 10)}},
		{"doubling", []algo.Option{algo.WithAlgorithm(algo.Doubling)}},
		{"auto/small=0", []algo.Option{algo.WithSmallBytes(-1)}},
	}
	nw := 2 + rng.IntN(2)
	all := make([]int, cfg.n)
	for i := range all {
		all[i] = i
	}
	for w := range nw {
		a := algos[0]
		if w > 0 {
			a = algos[1+rng.IntN(len(algos)-1)]
		}
		p.worlds = append(p.worlds, newGroup(all, -1, true, a.name))
		opts := []collectives.Option{collectives.WithTimeout(rndTimeout)}
		if a.opts != nil {
			opts = append(opts, collectives.WithAlgorithm(a.opts...))
		}
		p.opts = append(p.opts, opts)
	}
	live := slices.Clone(p.worlds)
	// recent[g]: steps on g whose (identical on every rank) output later
	// steps on g may take as input.
	recent := map[int][]int{}
	forced := -1 // the step that is a large all-reduce
	if cfg.large {
		forced = rng.IntN(cfg.steps)
	}
	extremeKeys := []int{math.MinInt, math.MaxInt, math.MinInt + 1, math.MaxInt - 1, 1 << 40, -(1 << 40)}
	for i := 0; i < cfg.steps; i++ {
		gi := live[rng.IntN(len(live))]
		grp := p.groups[gi]
		n := len(grp.members)
		st := &rndStep{idx: i, group: gi, chain: -1, flags: make([]uint8, n)}
		type choice struct {
			k rndKind
			w int
		}
		choices := []choice{{rkAllReduce, 30}, {rkAllGather, 10}, {rkReduceScatter, 10}, {rkBroadcast, 10},
			{rkBarrier, 3}, {rkBadOp, 2}, {rkBadRoot, 2}, {rkBadPeer, 1}}
		if n >= 2 {
			choices = append(choices, choice{rkSendRecv, 12})
		}
		if len(live) < rndMaxLive {
			choices = append(choices, choice{rkSplit, 5})
		}
		if !grp.world {
			choices = append(choices, choice{rkRetire, len(live)})
		}
		sum := 0
		for _, c := range choices {
			sum += c.w
		}
		x := rng.IntN(sum)
		for _, c := range choices {
			if x < c.w {
				st.kind = c.k
				break
			}
			x -= c.w
		}
		if i == forced {
			st.kind, st.group, grp, n = rkAllReduce, p.worlds[0], p.groups[p.worlds[0]], cfg.n
			st.flags = make([]uint8, n)
		}
		p.steps = append(p.steps, st)

		switch st.kind {
		case rkBarrier:
			continue
		case rkRetire:
			st.sync = newRndRendezvous(n)
			live = slices.DeleteFunc(live, func(g int) bool { return g == gi })
			continue
		case rkSplit:
			st.colors, st.keys, st.newGroup = make([]int, n), make([]int, n), make([]int, n)
			ncolors := 1 + rng.IntN(3)
			for r := range n {
				st.colors[r] = rng.IntN(ncolors)
				if rng.IntN(7) == 0 {
					st.colors[r] = -1 - rng.IntN(3)
				}
				st.keys[r] = rng.IntN(7) - 3
				if rng.IntN(20) == 0 && os.Getenv("ZZ_NOEXTREME") == "" {
					st.keys[r] = extremeKeys[rng.IntN(len(extremeKeys))]
				}
			}
			// MPI_Comm_split: members of a color ordered by key, ties by rank.
			for c := range ncolors {
				var ms []int
				for r := range n {
					if st.colors[r] == c {
						ms = append(ms, r)
					}
				}
				if len(ms) == 0 {
					continue
				}
				slices.SortStableFunc(ms, func(a, b int) int { return cmpInt(st.keys[a], st.keys[b]) })
				world := make([]int, len(ms))
				for j, r := range ms {
					world[j] = grp.members[r]
				}
				ng := newGroup(world, gi, false, grp.algo)
				for _, r := range ms {
					st.newGroup[r] = ng
				}
				live = append(live, ng)
			}
			for r := range n {
				if st.colors[r] < 0 {
					st.newGroup[r] = -1
				}
			}
			continue
		}

		// A step with data.
		st.seed = rng.Uint64()
		st.dt = gpu.DTypes[rng.IntN(len(gpu.DTypes))]
		chainable := st.kind == rkAllReduce || st.kind == rkAllGather || st.kind == rkReduceScatter ||
			st.kind == rkBroadcast || st.kind == rkSendRecv
		var srcs []int
		for _, j := range recent[gi] {
			if j >= i-rndChainAge {
				srcs = append(srcs, j)
			}
		}
		recent[gi] = srcs
		switch {
		case i == forced:
			st.dt = []gpu.DType{gpu.Int64, gpu.Float64}[rng.IntN(2)] // 8-byte elements: fewer to check
			st.count = (rndLargeMin + rng.IntN(rndLargeMax-rndLargeMin)) / st.dt.Size()
			st.shape = rndShape(rng, st.count)
		case chainable && len(srcs) > 0 && rng.IntN(4) == 0:
			if st.kind == rkAllReduce || st.kind == rkReduceScatter {
				// Reductions of NaNs have no one right answer: not from moved floats.
				srcs = slices.DeleteFunc(slices.Clone(srcs), func(j int) bool { return !p.steps[j].nanFree() })
				if len(srcs) == 0 {
					st.count = rndPickCount(rng, st.dt, cfg.long)
					st.shape = rndShape(rng, st.count)
					break
				}
			}
			src := p.steps[srcs[rng.IntN(len(srcs))]]
			st.chain = src.idx
			st.nanFreeIn = src.nanFree()
			st.dt = src.dt
			st.shape = src.outShape(p, 0)
			st.count = rndCount(st.shape)
		default:
			st.count = rndPickCount(rng, st.dt, cfg.long)
			if st.kind == rkAllGather && st.count*st.dt.Size() > 4<<20 {
				st.count = (4 << 20) / st.dt.Size() / n
			}
			st.shape = rndShape(rng, st.count)
		}
		switch st.kind {
		case rkAllReduce, rkReduceScatter:
			st.op = collectives.Op(1 + rng.IntN(4))
			if st.chain >= 0 && st.dt.IsFloat() {
				st.op = []collectives.Op{collectives.Min, collectives.Max}[rng.IntN(2)]
			}
			st.gen = map[collectives.Op]rndGen{collectives.Sum: genSum, collectives.Prod: genProd,
				collectives.Min: genMinMax, collectives.Max: genMinMax}[st.op]
		case rkBadOp:
			st.op = []collectives.Op{0, 5, 200}[rng.IntN(3)]
			st.alt = rng.IntN(2) == 0
			st.want = collectives.ErrBadOp
		case rkBroadcast:
			st.root = rng.IntN(n)
		case rkBadRoot:
			st.root = []int{-1, n, n + 3, 1 << 32, 1<<32 + 1, -(1 << 32), math.MaxInt, math.MinInt}[rng.IntN(8)]
			st.want = collectives.ErrBadArgument
		case rkSendRecv:
			st.src = rng.IntN(n)
			st.dst = (st.src + 1 + rng.IntN(n-1)) % n
		case rkBadPeer:
			st.src = rng.IntN(n)
			st.dst = []int{st.src, -1, n, n + 7}[rng.IntN(4)]
			st.want = collectives.ErrBadPeer
		}
		if st.kind == rkBadOp || st.kind == rkBadRoot || st.kind == rkBadPeer {
			st.count = min(st.count, rndChainMax)
			st.shape = rndShape(rng, st.count)
			st.chain = -1
		}
		for r := range n {
			if st.want != nil {
				continue
			}
			var f uint8
			if st.kind == rkAllReduce && st.chain < 0 && rng.IntN(3) == 0 {
				f |= flDonate
			} else if st.chain < 0 && rng.IntN(6) == 0 {
				f |= flFree
			} else if rng.IntN(3) == 0 {
				f |= flCheckIn
			}
			if rng.IntN(8) == 0 {
				f |= flImpatient
			}
			st.flags[r] = f
		}
		// Results identical on every rank may feed later steps.
		if (st.kind == rkAllReduce || st.kind == rkAllGather || st.kind == rkBroadcast) &&
			rndCount(st.outShape(p, 0)) <= rndChainMax {
			recent[gi] = append(recent[gi], i)
		}
	}
	return p
}

// nanFree reports whether st's output can hold no NaN.
func (st *rndStep) nanFree() bool {
	switch {
	case !st.dt.IsFloat():
		return true
	case st.chain >= 0:
		return st.nanFreeIn
	}
	return st.gen != genMove
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ---- values: element i of group rank q's input, and their arithmetic ----

func rndMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func rndMask(dt gpu.DType) uint64 {
	if dt.Size() == 8 {
		return math.MaxUint64
	}
	return 1<<(8*dt.Size()) - 1
}

func rndToF(dt gpu.DType, b uint64) float64 {
	switch dt {
	case gpu.Float32:
		return float64(math.Float32frombits(uint32(b)))
	case gpu.Float64:
		return math.Float64frombits(b)
	case gpu.Float16:
		return float64(half.Float16(b).Float32())
	}
	return float64(half.BFloat16(b).Float32())
}

func rndFromF(dt gpu.DType, v float64) uint64 {
	switch dt {
	case gpu.Float32:
		return uint64(math.Float32bits(float32(v)))
	case gpu.Float64:
		return math.Float64bits(v)
	case gpu.Float16:
		return uint64(half.F16(float32(v)))
	}
	return uint64(half.BF16(float32(v)))
}

func rndToI(dt gpu.DType, b uint64) int64 {
	switch dt {
	case gpu.Int8:
		return int64(int8(b))
	case gpu.Int16:
		return int64(int16(b))
	case gpu.Int32:
		return int64(int32(b))
	case gpu.Uint8:
		return int64(uint8(b))
	}
	return int64(b)
}

// rndValue is an input element's bits, from the hash h.
func rndValue(dt gpu.DType, gen rndGen, h uint64) uint64 {
	if !dt.IsFloat() || gen == genMove {
		return h & rndMask(dt)
	}
	switch gen {
	case genSum:
		return rndFromF(dt, float64(int64(h%17)-8))
	case genProd:
		return rndFromF(dt, float64(int64(h%7)-3))
	}
	b := h & rndMask(dt)
	if v := rndToF(dt, b); v != v || v == 0 { // NaN, or a zero of either sign
		b = rndFromF(dt, float64(int64((h>>40)%2001)-1000))
	}
	return b
}

func rndElem(seed uint64, q, i int) uint64 { return rndMix(seed ^ uint64(q)<<48 ^ uint64(i)) }

func rndGet(b []byte, i, w int) uint64 {
	switch w {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}

func rndPut(b []byte, i, w int, v uint64) {
	switch w {
	case 1:
		b[i] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

// rndReduce folds the n ranks' element i in rank order: float64 arithmetic
// (exact for the values chosen) rounded back once, or int64 arithmetic
// wrapped to the dtype's width.
func rndReduce(dt gpu.DType, op collectives.Op, n int, elem func(q, i int) uint64, i int) uint64 {
	if dt.IsFloat() && (op == collectives.Min || op == collectives.Max) {
		// The winner's own bits: no two inputs are equal in value but
		// different in bits (no NaN, no -0 beside +0), so it is unique.
		best := elem(0, i)
		for q := 1; q < n; q++ {
			b := elem(q, i)
			if v, w := rndToF(dt, b), rndToF(dt, best); op == collectives.Min && v < w || op == collectives.Max && v > w {
				best = b
			}
		}
		return best
	}
	if dt.IsFloat() {
		acc := rndToF(dt, elem(0, i))
		for q := 1; q < n; q++ {
			v := rndToF(dt, elem(q, i))
			if op == collectives.Sum {
				acc += v
			} else {
				acc *= v
			}
		}
		return rndFromF(dt, acc)
	}
	acc := rndToI(dt, elem(0, i))
	for q := 1; q < n; q++ {
		v := rndToI(dt, elem(q, i))
		switch op {
		case collectives.Sum:
			acc += v
		case collectives.Prod:
			acc *= v
		case collectives.Min:
			acc = min(acc, v)
		default:
			acc = max(acc, v)
		}
	}
	return uint64(dt.Wrap(acc)) & rndMask(dt)
}

func rndDescribe(dt gpu.DType, b uint64) string {
	if dt.IsFloat() {
		return fmt.Sprintf("%v (bits %#x)", rndToF(dt, b), b)
	}
	return fmt.Sprint(rndToI(dt, b))
}

// rndDiff describes the first difference of got from want, or "".
func rndDiff(dt gpu.DType, got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
	}
	w := dt.Size()
	for i := 0; i < len(want)/w; i++ {
		if g, x := rndGet(got, i, w), rndGet(want, i, w); g != x {
			bad := 0
			for j := i; j < len(want)/w; j++ {
				if rndGet(got, j, w) != rndGet(want, j, w) {
					bad++
				}
			}
			return fmt.Sprintf("element %d of %d is %s, want %s (%d elements differ)",
				i, len(want)/w, rndDescribe(dt, g), rndDescribe(dt, x), bad)
		}
	}
	return ""
}

// ---- running a plan ----

type rndRendezvous struct {
	left atomic.Int64
	done chan struct{}
}

func newRndRendezvous(n int) *rndRendezvous {
	r := &rndRendezvous{done: make(chan struct{})}
	r.left.Store(int64(n))
	return r
}

func (r *rndRendezvous) arrive(stop <-chan struct{}) bool {
	if r.left.Add(-1) == 0 {
		close(r.done)
	}
	select {
	case <-r.done:
		return true
	case <-stop:
		return false
	}
}

type rndWorld struct {
	t        *testing.T
	cfg      rndConfig
	p        *rndPlan
	ctx      context.Context
	stopOnce sync.Once
	stopCh   chan struct{}
	cancel   context.CancelFunc
	failures atomic.Int64
	end      *rndRendezvous
	shared   sync.Map     // step -> *rndShared
	checked  atomic.Int64 // outputs compared
	bytes    atomic.Int64 // and their bytes
}

func (w *rndWorld) stop() {
	w.stopOnce.Do(func() {
		close(w.stopCh)
		w.cancel()
	})
}

func (w *rndWorld) stopped() bool {
	select {
	case <-w.stopCh:
		return true
	default:
		return false
	}
}

// failf reports a failure with what it takes to replay it; after a few the
// world stops issuing.
func (w *rndWorld) failf(rank int, st *rndStep, format string, args ...any) {
	n := w.failures.Add(1)
	if n > 10 {
		w.stop()
		return
	}
	where := "end of run"
	if st != nil {
		where = st.String()
	}
	w.t.Errorf("seed %d, %d ranks, rank %d, %s: %s\n\treplay: %s", w.cfg.seed, w.cfg.n, rank, where,
		fmt.Sprintf(format, args...), w.cfg.replay)
	if n >= 10 {
		w.stop()
	}
}

type rndCheck struct {
	st    *rndStep
	gr    int
	out   *array.Array // nil: only the input is checked
	in    *array.Array // to check unchanged, or nil
	shape []int
	keep  bool // out may be a later step's input: not freed
}

type rndRank struct {
	w      *rndWorld
	p      *rndPlan
	r      int
	s      *streams.GPU
	groups []*collectives.Group // by plan group id
	outs   map[int]*array.Array // possible inputs of later steps, by step
	checks []rndCheck
	held   int // bytes the pending checks hold
}

func rndRunWorld(t *testing.T, cfg rndConfig) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // runs last: after the runtime and device closed
	dev := testenv.Device(t)
	rt := testenv.Runtime(t)
	p := rndMakePlan(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &rndWorld{t: t, cfg: cfg, p: p, ctx: ctx, cancel: cancel, stopCh: make(chan struct{}), end: newRndRendezvous(cfg.n)}
	algos := make([]string, len(p.worlds))
	for i, g := range p.worlds {
		algos[i] = p.groups[g].algo
	}
	t.Logf("seed %d, %d ranks: %d steps, worlds %v", cfg.seed, cfg.n, len(p.steps), algos)
	ranks := make([]*rndRank, cfg.n)
	for r := range cfg.n {
		s := testenv.Stream(t, rt, dev)
		ranks[r] = &rndRank{w: w, p: p, r: r, s: s, groups: make([]*collectives.Group, len(p.groups)),
			outs: map[int]*array.Array{}}
	}
	for i, gi := range p.worlds {
		gs, err := collectives.Local(rt, cfg.n, p.opts[i]...)
		if err != nil {
			t.Fatal(err)
		}
		for r, g := range gs {
			ranks[r].groups[gi] = g
		}
	}
	var wg sync.WaitGroup
	for _, rk := range ranks {
		wg.Go(rk.run)
	}
	wg.Wait()
	// Nothing may be left pending: every stream idle, every fence released.
	for _, rk := range ranks {
		rctx, rcancel := context.WithTimeout(context.Background(), rndReadTime)
		if err := rk.s.Last().Wait(rctx); err != nil {
			w.failf(rk.r, nil, "GPU stream not idle: %v", err)
		}
		rcancel()
	}
	deadline := time.Now().Add(30 * time.Second)
	for testenv.Fences(t, rt).Live() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := testenv.Fences(t, rt).Live(); n != 0 {
		w.failf(-1, nil, "%d fences still live after every group was waited for and closed", n)
	}
	t.Logf("seed %d, %d ranks: %d outputs (%d bytes) checked", cfg.seed, cfg.n, w.checked.Load(), w.bytes.Load())
}

func (rk *rndRank) failf(st *rndStep, format string, args ...any) {
	rk.w.failf(rk.r, st, format, args...)
}

func (rk *rndRank) run() {
	for _, st := range rk.p.steps {
		if rk.w.stopped() {
			break
		}
		rk.step(st)
		if len(rk.checks) >= 32 || rk.held >= 64<<20 {
			rk.flush()
		}
		for j := range rk.outs {
			if j < st.idx-rndChainAge {
				delete(rk.outs, j)
			}
		}
		if rk.r == 0 && st.idx%16 == 0 { // an output dropped too early is computed again
			rk.w.shared.Range(func(k, _ any) bool {
				if k.(int) < st.idx-4*rndChainAge {
					rk.w.shared.Delete(k)
				}
				return true
			})
		}
	}
	rk.flush()
	rk.finish()
}

// finish: every group this rank still holds is drained (Barrier, then Wait
// without error); once every rank is there, the groups close.
func (rk *rndRank) finish() {
	for gi := len(rk.groups) - 1; gi >= 0; gi-- {
		g := rk.groups[gi]
		if g == nil || rk.w.stopped() {
			continue
		}
		ctx, cancel := context.WithTimeout(rk.w.ctx, rndReadTime)
		if err := g.Barrier(ctx); err != nil {
			rk.failf(nil, "group %d: final barrier: %v", gi, err)
		}
		if err := g.Wait(ctx); err != nil {
			rk.failf(nil, "group %d: final wait: %v", gi, err)
		}
		cancel()
	}
	stopped := !rk.w.end.arrive(rk.w.stopCh)
	for gi := len(rk.groups) - 1; gi >= 0; gi-- {
		g := rk.groups[gi]
		if g == nil {
			continue
		}
		if !stopped {
			deadline := time.Now().Add(30 * time.Second)
			for g.Comm().Pending() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := g.Comm().Pending(); n != 0 {
				rk.failf(nil, "group %d: %d tasks pending on the comm stream after Wait", gi, n)
			}
		}
		if err := g.Close(); err != nil {
			rk.failf(nil, "group %d: close: %v", gi, err)
		}
		rk.groups[gi] = nil
	}
}

func (rk *rndRank) readCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), rndReadTime)
}

// elemFn gives element i of group rank q's input of st.
func (rk *rndRank) elemFn(st *rndStep) func(q, i int) uint64 {
	if st.chain >= 0 {
		src := rk.expected(rk.p.steps[st.chain], 0)
		w := st.dt.Size()
		return func(_, i int) uint64 { return rndGet(src, i, w) }
	}
	dt, gen, seed := st.dt, st.gen, st.seed
	return func(q, i int) uint64 { return rndValue(dt, gen, rndElem(seed, q, i)) }
}

// inputBytes is group rank gr's input of st.
func (rk *rndRank) inputBytes(st *rndStep, gr int) []byte {
	w := st.dt.Size()
	b := make([]byte, st.count*w)
	elem := rk.elemFn(st)
	for i := range st.count {
		rndPut(b, i, w, elem(gr, i))
	}
	return b
}

// rndShared is an output every rank of a step has alike, computed once.
type rndShared struct {
	once sync.Once
	b    []byte
}

// expected is group rank gr's output of st (read only: it may be shared).
func (rk *rndRank) expected(st *rndStep, gr int) []byte {
	if st.kind == rkAllReduce || st.kind == rkAllGather || st.kind == rkBroadcast {
		v, _ := rk.w.shared.LoadOrStore(st.idx, &rndShared{})
		e := v.(*rndShared)
		e.once.Do(func() { e.b = rk.compute(st, 0) })
		return e.b
	}
	return rk.compute(st, gr)
}

// compute is expected, without the sharing.
func (rk *rndRank) compute(st *rndStep, gr int) []byte {
	n := len(rk.p.groups[st.group].members)
	w := st.dt.Size()
	elem := rk.elemFn(st)
	var out []byte
	switch st.kind {
	case rkAllReduce:
		out = make([]byte, st.count*w)
		for i := range st.count {
			rndPut(out, i, w, rndReduce(st.dt, st.op, n, elem, i))
		}
	case rkReduceScatter:
		lo, hi := algo.BlockRange(st.count, n, gr)
		out = make([]byte, (hi-lo)*w)
		for i := lo; i < hi; i++ {
			rndPut(out, i-lo, w, rndReduce(st.dt, st.op, n, elem, i))
		}
	case rkAllGather:
		out = make([]byte, n*st.count*w)
		for q := range n {
			for i := range st.count {
				rndPut(out, q*st.count+i, w, elem(q, i))
			}
		}
	case rkBroadcast:
		out = rk.inputBytes(st, st.root)
	case rkSendRecv:
		out = rk.inputBytes(st, st.src)
	}
	return out
}

func rndUpload[T array.Element](s *streams.GPU, count int, shape []int, fill func([]byte)) (*array.Array, error) {
	v := make([]T, count)
	if count > 0 {
		fill(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), count*int(unsafe.Sizeof(v[0]))))
	}
	return array.FromSlice(s, v, shape...)
}

// input makes (or, for a chained step, finds) group rank gr's input of st.
func (rk *rndRank) input(st *rndStep, gr int) (*array.Array, bool) {
	if st.chain >= 0 {
		x := rk.outs[st.chain]
		if x == nil {
			rk.failf(st, "test bug: no output of step %d to take as input", st.chain)
			return nil, false
		}
		return x, true
	}
	fill := func(b []byte) {
		w := st.dt.Size()
		elem := rk.elemFn(st)
		for i := range st.count {
			rndPut(b, i, w, elem(gr, i))
		}
	}
	var x *array.Array
	var err error
	switch st.dt {
	case gpu.Float32:
		x, err = rndUpload[float32](rk.s, st.count, st.shape, fill)
	case gpu.Float64:
		x, err = rndUpload[float64](rk.s, st.count, st.shape, fill)
	case gpu.Float16:
		x, err = rndUpload[half.Float16](rk.s, st.count, st.shape, fill)
	case gpu.BFloat16:
		x, err = rndUpload[half.BFloat16](rk.s, st.count, st.shape, fill)
	case gpu.Int8:
		x, err = rndUpload[int8](rk.s, st.count, st.shape, fill)
	case gpu.Int16:
		x, err = rndUpload[int16](rk.s, st.count, st.shape, fill)
	case gpu.Int32:
		x, err = rndUpload[int32](rk.s, st.count, st.shape, fill)
	case gpu.Int64:
		x, err = rndUpload[int64](rk.s, st.count, st.shape, fill)
	case gpu.Uint8:
		x, err = rndUpload[uint8](rk.s, st.count, st.shape, fill)
	}
	if err == nil && len(st.shape) == 0 {
		// FromSlice makes an empty shape 1-D: a scalar is a view of it.
		x, err = array.Wrap(rk.s, st.shape, st.dt, x.Memory(), x.Event())
	}
	if err != nil {
		rk.failf(st, "upload input: %v", err)
		return nil, false
	}
	return x, true
}

func (rk *rndRank) step(st *rndStep) {
	gr := rk.p.groups[st.group].rankOf[rk.r]
	if gr < 0 {
		return // not a member
	}
	g := rk.groups[st.group]
	if g == nil {
		rk.failf(st, "test bug: no group %d", st.group)
		rk.w.stop()
		return
	}
	flags := st.flags
	switch st.kind {
	case rkBarrier:
		ctx, cancel := context.WithTimeout(rk.w.ctx, rndReadTime)
		defer cancel()
		if err := g.Barrier(ctx); err != nil {
			rk.failf(st, "barrier: %v", err)
			rk.w.stop()
		}
		return
	case rkRetire:
		ctx, cancel := context.WithTimeout(rk.w.ctx, rndReadTime)
		defer cancel()
		if err := g.Barrier(ctx); err != nil {
			rk.failf(st, "barrier before close: %v", err)
			rk.w.stop()
			return
		}
		if err := g.Wait(ctx); err != nil {
			rk.failf(st, "wait before close: %v", err)
		}
		if !st.sync.arrive(rk.w.stopCh) {
			return
		}
		if err := g.Close(); err != nil {
			rk.failf(st, "close: %v", err)
		}
		rk.groups[st.group] = nil
		return
	case rkSplit:
		sub, err := g.Split(st.colors[gr], st.keys[gr])
		if err != nil {
			rk.failf(st, "split: %v", err)
			rk.w.stop()
			return
		}
		ng := st.newGroup[gr]
		if ng < 0 {
			if sub != nil {
				rk.failf(st, "color %d: got a group of %d, want none", st.colors[gr], sub.Size())
				_ = sub.Close()
			}
			return
		}
		want := rk.p.groups[ng]
		if sub == nil {
			rk.failf(st, "color %d: got no group, want rank %d of %d", st.colors[gr], want.rankOf[rk.r], len(want.members))
			rk.w.stop()
			return
		}
		if sub.Size() != len(want.members) || sub.Rank() != want.rankOf[rk.r] {
			rk.failf(st, "color %d key %d: got rank %d of %d, want rank %d of %d (members by world rank, ordered by key: %v)",
				st.colors[gr], st.keys[gr], sub.Rank(), sub.Size(), want.rankOf[rk.r], len(want.members), want.members)
			_ = sub.Close()
			rk.w.stop()
			return
		}
		rk.groups[ng] = sub
		return
	}

	if st.kind == rkBadPeer {
		x, ok := rk.input(st, gr)
		if !ok {
			return
		}
		if gr == st.src {
			if err := g.Send(rk.s, x, st.dst); !errors.Is(err, collectives.ErrBadPeer) {
				rk.failf(st, "send to %d in a group of %d: %v, want ErrBadPeer at once", st.dst, g.Size(), err)
			}
			return
		}
		peer := st.dst // out of range, or the source itself: then each receives from itself
		if peer == st.src {
			peer = gr
		}
		if y, err := g.Recv(rk.s, st.shape, st.dt, peer); !errors.Is(err, collectives.ErrBadPeer) || y != nil {
			rk.failf(st, "recv from %d in a group of %d: %v %v, want ErrBadPeer at once", peer, g.Size(), y, err)
		}
		return
	}

	var x *array.Array
	var fresh bool
	if st.kind != rkSendRecv || gr == st.src {
		var ok bool
		if x, ok = rk.input(st, gr); !ok {
			return
		}
		fresh = st.chain < 0
	} else if gr != st.dst {
		return // a send/recv between two others
	}
	var out *array.Array
	var err error
	switch st.kind {
	case rkAllReduce, rkBadOp:
		switch {
		case st.alt: // a bad op as a reduce-scatter
			out, err = g.ReduceScatter(rk.s, x, st.op)
		case flags[gr]&flDonate != 0:
			out, err = g.AllReduce(rk.s, x, st.op, collectives.Donate())
		default:
			out, err = g.AllReduce(rk.s, x, st.op)
		}
	case rkAllGather:
		out, err = g.AllGather(rk.s, x)
	case rkReduceScatter:
		out, err = g.ReduceScatter(rk.s, x, st.op)
	case rkBroadcast, rkBadRoot:
		out, err = g.Broadcast(rk.s, x, st.root)
	case rkSendRecv:
		if gr == st.src {
			err = g.Send(rk.s, x, st.dst)
		} else {
			out, err = g.Recv(rk.s, st.shape, st.dt, st.src)
		}
	}
	if st.want != nil {
		rk.expectFailure(st, g, gr, out, err)
		return
	}
	if err != nil {
		rk.failf(st, "launch: %v", err)
		return
	}
	if out == nil && (st.kind != rkSendRecv || gr == st.dst) {
		rk.failf(st, "launch returned neither an output array nor an error")
		rk.w.stop() // later steps may take it as input
		return
	}
	f := flags[gr]
	if f&flDonate != 0 {
		x = nil // the output owns its memory now
	}
	if x != nil && fresh && f&flFree != 0 {
		if err := x.Free(); err != nil {
			rk.failf(st, "free the input after the launch: %v", err)
		}
		x = nil
	}
	if out != nil && f&flImpatient != 0 {
		rk.impatient(st, gr, out)
	}
	c := rndCheck{st: st, gr: gr, out: out}
	if out != nil {
		c.shape = st.outShape(rk.p, gr)
		rk.held += rndCount(c.shape) * st.dt.Size()
		if (st.kind == rkAllReduce || st.kind == rkAllGather || st.kind == rkBroadcast) && rndCount(c.shape) <= rndChainMax {
			rk.outs[st.idx] = out
			c.keep = true
		}
	}
	if x != nil && f&flCheckIn != 0 {
		c.in = x
		rk.held += st.count * st.dt.Size()
	}
	if c.out != nil || c.in != nil {
		rk.checks = append(rk.checks, c)
	}
}

// expectFailure: an error step's output fails with its sentinel, and so
// does the group's Wait; or the call refuses it at once.
func (rk *rndRank) expectFailure(st *rndStep, g *collectives.Group, gr int, out *array.Array, err error) {
	if err != nil {
		if !errors.Is(err, st.want) {
			rk.failf(st, "refused at once with %v, want an error wrapping %v", err, st.want)
		}
		return
	}
	ctx, cancel := rk.readCtx()
	defer cancel()
	start := time.Now()
	b, rerr := array.HostBytes(ctx, out)
	runtime.KeepAlive(out)
	switch {
	case rerr == nil:
		rk.failf(st, "succeeded with %d bytes, want an error wrapping %v", len(b), st.want)
	case !errors.Is(rerr, st.want):
		rk.failf(st, "read: %v (after %v), want an error wrapping %v", rerr, time.Since(start), st.want)
	case !errors.Is(rerr, collectives.ErrReleased):
		rk.failf(st, "read: %v: a failed output should match ErrReleased too", rerr)
	}
	if werr := g.Wait(ctx); !errors.Is(werr, st.want) {
		rk.failf(st, "group wait after the failed call: %v, want an error wrapping %v", werr, st.want)
	}
}

// impatient reads out with a deadline too short for most collectives: it
// may succeed (then with the right data) or time out, and either way the
// collective goes on (the later check reads it again).
func (rk *rndRank) impatient(st *rndStep, gr int, out *array.Array) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Microsecond)
	defer cancel()
	b, err := array.HostBytes(ctx, out)
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, collectives.ErrTimeout) {
			rk.failf(st, "read with a short deadline: %v, want success or a deadline error", err)
		}
		return
	}
	if d := rndDiff(st.dt, b, rk.expected(st, gr)); d != "" {
		rk.failf(st, "read with a short deadline: %s", d)
	}
	runtime.KeepAlive(out)
}

// flush runs the pending checks.
func (rk *rndRank) flush() {
	for _, c := range rk.checks {
		rk.check(c)
	}
	rk.checks, rk.held = nil, 0
}

func (rk *rndRank) check(c rndCheck) {
	st := c.st
	if c.out != nil {
		ctx, cancel := rk.readCtx()
		b, err := array.HostBytes(ctx, c.out)
		cancel()
		switch {
		case err != nil:
			rk.failf(st, "read output: %v", err)
		case !slices.Equal(c.out.Shape(), c.shape) || c.out.DType() != st.dt:
			rk.failf(st, "output is %v %s, want %v %s", c.out.Shape(), c.out.DType(), c.shape, st.dt)
		default:
			if d := rndDiff(st.dt, b, rk.expected(st, c.gr)); d != "" {
				rk.failf(st, "output: %s", d)
			}
			rk.w.checked.Add(1)
			rk.w.bytes.Add(int64(len(b)))
		}
		runtime.KeepAlive(c.out)
		if !c.keep {
			if err := c.out.Free(); err != nil {
				rk.failf(st, "free the output once read: %v", err)
			}
		}
	}
	if c.in != nil {
		ctx, cancel := rk.readCtx()
		b, err := array.HostBytes(ctx, c.in)
		cancel()
		if err != nil {
			rk.failf(st, "read input afterwards: %v", err)
		} else if d := rndDiff(st.dt, b, rk.inputBytes(st, c.gr)); d != "" {
			rk.failf(st, "input changed by the collective: %s", d)
		}
		runtime.KeepAlive(c.in)
	}
}
