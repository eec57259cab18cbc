package algo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// The benchmarks below run the flat algorithms and the two levels side by
// side on in-process ranks placed on fake hosts, over the message path.
// With "mem" links every pair of ranks is as fast as every other, so the
// levels can only lose (their extra phase is the price); with "10G" or
// "1G" links every message between hosts first passes its sending host's
// NIC, a queue shared by the host's ranks at 1.25 GB/s (10 Gbit/s) or
// 0.125 GB/s, plus 20 us of latency: a model of hosts joined by a network
// link, across which the levels move fewer bytes (for the all-reduce, the
// vector once per host each way instead of 2(n-1)/n of it at each of the
// flat ring's two crossings per host). The model sleeps through each
// message's time on the link; it is not a network, and all the simulated
// hosts share this machine's cores: on a small machine, where the ranks'
// reductions and copies take as long as the 10G link, the 1G model is the
// one in which the link, as between real hosts, is the bottleneck.

// nic is one host's modelled egress link.
type nic struct {
	mu   sync.Mutex
	free time.Time // when the link has sent what is queued
	rate float64   // bytes per second
	lat  time.Duration
}

// pass waits for size bytes to cross the link: queued behind the host's
// earlier messages, then the latency.
func (l *nic) pass(ctx context.Context, size int) error {
	l.mu.Lock()
	start := time.Now()
	if l.free.After(start) {
		start = l.free
	}
	l.free = start.Add(time.Duration(float64(size) / l.rate * 1e9))
	done := l.free.Add(l.lat)
	l.mu.Unlock()
	t := time.NewTimer(time.Until(done))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return transport.CtxError(ctx)
	}
}

// shaped is a rank's transport whose Sends to other hosts pass the
// sending host's nic first. It has no PeerAccess (the message path).
type shaped struct {
	transport.Transport
	hosts []string
	nics  map[string]*nic
}

func (s shaped) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	if h := s.hosts[s.Rank()]; s.hosts[dst] != h {
		if err := s.nics[h].pass(ctx, len(data)); err != nil {
			return err
		}
	}
	return s.Transport.Send(ctx, dst, tag, data)
}

// linkRates are the modelled NICs' rates in bytes per second.
var linkRates = map[string]float64{"10G": 1.25e9, "1G": 1.25e8}

// benchLinks makes in-process ranks on hosts: plain message links
// ("mem"), or shaped by a NIC per host ("10G", "1G").
func benchLinks(hosts []string, link string) []transport.Transport {
	ts := local(len(hosts), true)
	if link == "mem" {
		return ts
	}
	nics := map[string]*nic{}
	for _, h := range hosts {
		nics[h] = &nic{rate: linkRates[link], lat: 20 * time.Microsecond}
	}
	for r, tr := range ts {
		ts[r] = shaped{tr, hosts, nics}
	}
	return ts
}

// busFactor is nccl-tests' bus bandwidth factor of kind on n ranks.
func busFactor(kind algo.Kind, n int) float64 {
	switch kind {
	case algo.KindAllReduce:
		return 2 * float64(n-1) / float64(n)
	case algo.KindBroadcast:
		return 1
	}
	return float64(n-1) / float64(n)
}

// benchHier runs b.N float32 sum collectives of kind on ranks placed on
// hosts, size bytes being the op's largest buffer (nccl-tests' size: the
// all-reduce's vector, the all-gather's output, the reduce-scatter's
// input, the broadcast's buffer), and reports algbw and busbw in GB/s and
// the time per op.
func benchHier(b *testing.B, kind algo.Kind, hosts []string, link string, size int, opts []algo.Option) {
	ts := benchLinks(hosts, link)
	defer closeAll(ts)
	n := len(hosts)
	count := size / 4
	if kind == algo.KindAllGather {
		count /= n
	}
	ins, outs := make([][]byte, n), make([][]byte, n)
	for r := range ins {
		ins[r] = gen(gpu.Float32, reduce.Sum, count, r, 1)
		switch kind {
		case algo.KindAllGather:
			outs[r] = make([]byte, n*len(ins[r]))
		case algo.KindReduceScatter:
			lo, hi := algo.BlockRange(count, n, r)
			outs[r] = make([]byte, (hi-lo)*4)
		default:
			outs[r] = make([]byte, len(ins[r]))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	one := func(tr transport.Transport, r int, seq uint64) error {
		d := algo.Desc{Group: 1, Seq: seq, DType: gpu.Float32, Count: count, Op: reduce.Sum}
		switch kind {
		case algo.KindAllReduce:
			return algo.AllReduce(ctx, tr, d, ins[r], outs[r], opts...)
		case algo.KindAllGather:
			return algo.AllGather(ctx, tr, d, ins[r], outs[r], opts...)
		case algo.KindReduceScatter:
			return algo.ReduceScatter(ctx, tr, d, ins[r], outs[r], opts...)
		}
		return algo.Broadcast(ctx, tr, d, outs[r], opts...)
	}
	timeRanks(b, ts, size, busFactor(kind, n), 1, one)
}

var benchLayouts = []layout{
	{"2x2", []string{"a", "a", "b", "b"}, true},
	{"2x4", []string{"a", "a", "a", "a", "b", "b", "b", "b"}, true},
}

// BenchmarkHier: flat and two-level side by side, every op the levels
// serve, 2 hosts of 2 and of 4 ranks, 1 to 64 MiB on the "mem" and "10G"
// links, 4 and 16 MiB on "1G". "flat" is Auto without a topology (the
// ring; the tree for broadcast), "levels" is Auto with one (no threshold
// at these sizes).
func BenchmarkHier(b *testing.B) {
	kinds := []algo.Kind{algo.KindAllReduce, algo.KindAllGather, algo.KindReduceScatter, algo.KindBroadcast}
	sizes := map[string][]int{"mem": {1 << 20, 16 << 20, 64 << 20}, "10G": {1 << 20, 16 << 20, 64 << 20}, "1G": {4 << 20, 16 << 20}}
	for _, lay := range benchLayouts {
		topo := topologyOf(b, lay.hosts)
		for _, link := range []string{"mem", "10G", "1G"} {
			for _, kind := range kinds {
				for _, size := range sizes[link] {
					for _, v := range []struct {
						name string
						opts []algo.Option
					}{{"flat", nil}, {"levels", []algo.Option{algo.WithTopology(topo)}}} {
						b.Run(fmt.Sprintf("%s/%s/%s/%dMiB/%s", lay.name, link, kind, size>>20, v.name), func(b *testing.B) {
							benchHier(b, kind, lay.hosts, link, size, v.opts)
						})
					}
				}
			}
		}
	}
}

// BenchmarkHierCrossover: the all-reduce around DefaultHierBytes on 2
// hosts of 4 ranks over the 10G model: flat (doubling up to SmallBytes,
// the ring above) against the levels forced at every size.
func BenchmarkHierCrossover(b *testing.B) {
	lay := benchLayouts[1]
	topo := topologyOf(b, lay.hosts)
	for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20} {
		for _, v := range []struct {
			name string
			opts []algo.Option
		}{
			{"flat", nil},
			{"flat-ring", []algo.Option{algo.WithAlgorithm(algo.Ring)}},
			{"levels", []algo.Option{algo.WithTopology(topo), algo.WithAlgorithm(algo.Hierarchical)}},
		} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, v.name), func(b *testing.B) {
				benchHier(b, algo.KindAllReduce, lay.hosts, "10G", size, v.opts)
			})
		}
	}
}
