package algo_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/gpu"
)

// memcpyGBps measures single-core memcpy of size bytes (bytes copied per
// second, GB = 1e9): the median of 9 rounds.
func memcpyGBps(size int) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	var rates []float64
	for i := 0; i < 9; i++ {
		t0 := time.Now()
		copy(dst, src)
		rates = append(rates, float64(size)/time.Since(t0).Seconds()/1e9)
	}
	slices.Sort(rates)
	return rates[len(rates)/2]
}

// BenchmarkMemcpy is the single-core memcpy baseline (64 MiB).
func BenchmarkMemcpy(b *testing.B) {
	const size = 64 << 20
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(dst, src)
	}
}

// benchAllReduce runs b.N float32 sum all-reduces of size bytes per rank on
// n in-process ranks, each rank in its own goroutine (its comm stream),
// after warm-up ops (buffers faulted in, pools filled), and reports algbw
// and busbw (nccl-tests: algbw*2(n-1)/n) in GB/s and the time per op.
func benchAllReduce(b *testing.B, cfg config, n, size int) {
	ts := local(n, cfg.plain)
	defer closeAll(ts)
	count := size / 4
	ins, outs := make([][]byte, n), make([][]byte, n)
	for r := range ins {
		ins[r] = gen(gpu.Float32, reduce.Sum, count, r, 1)
		outs[r] = bytes.Clone(ins[r])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	timeRanks(b, ts, size, 2*float64(n-1)/float64(n), 2, func(tr transport.Transport, r int, seq uint64) error {
		d := algo.Desc{Group: 1, Seq: seq, DType: gpu.Float32, Count: count, Op: reduce.Sum}
		return algo.AllReduce(ctx, tr, d, ins[r], outs[r], cfg.opts...)
	})
}

// timeRanks runs one op (each call one rank's part of it, under sequence
// number seq) on every rank of ts at once, in a goroutine per rank: warm
// ops first, then b.N timed ones; it reports algbw (size bytes per rank),
// busbw (algbw x bus) in GB/s and the time per op.
func timeRanks(b *testing.B, ts []transport.Transport, size int, bus float64, warm int,
	one func(tr transport.Transport, r int, seq uint64) error) {
	run := func(seq0, iters int) time.Duration {
		errc := make(chan error, len(ts))
		start := make(chan struct{})
		for r, tr := range ts {
			go func() {
				<-start
				for i := 0; i < iters; i++ {
					if err := one(tr, r, uint64(seq0+i)); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
		}
		t0 := time.Now()
		close(start)
		for range ts {
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	run(1<<40, warm)
	b.ResetTimer()
	el := run(0, b.N)
	b.StopTimer()
	per := el.Seconds() / float64(b.N)
	alg := float64(size) / per / 1e9
	b.ReportMetric(alg, "algbw_GB/s")
	b.ReportMetric(alg*bus, "busbw_GB/s")
	b.ReportMetric(per*1e6, "us/op")
}

var benchConfigs = []config{
	{"direct", false, nil},
	{"ring", false, []algo.Option{algo.WithAlgorithm(algo.Ring)}},
	{"msg", true, nil}, // message transport: doubling below SmallBytes, ring above
}

// BenchmarkAllReduce: 4 ranks, float32, 4 KiB / 1 MiB / 64 MiB per rank.
// The 64 MiB case also reports single-core memcpy measured in the same run
// and busbw as a fraction of it.
func BenchmarkAllReduce(b *testing.B) {
	for _, cfg := range benchConfigs {
		for _, size := range []int{4 << 10, 1 << 20, 64 << 20} {
			b.Run(fmt.Sprintf("%s/n=4/%dKiB", cfg.name, size>>10), func(b *testing.B) {
				benchAllReduce(b, cfg, 4, size)
				if size == 64<<20 {
					m := memcpyGBps(size)
					b.ReportMetric(m, "memcpy_GB/s")
				}
			})
		}
	}
}

// BenchmarkAllReduceLatency: 2 ranks, one float32 element.
func BenchmarkAllReduceLatency(b *testing.B) {
	for _, cfg := range benchConfigs {
		b.Run(cfg.name+"/n=2/1elem", func(b *testing.B) { benchAllReduce(b, cfg, 2, 4) })
	}
}

// BenchmarkCrossover measures the latency and bandwidth variants side by
// side around DefaultSmallBytes (how the default was chosen): message
// transport doubling vs ring, and direct one-phase vs sliced, 4 ranks.
func BenchmarkCrossover(b *testing.B) {
	variants := []config{
		{"msg-doubling", true, []algo.Option{algo.WithAlgorithm(algo.Doubling)}},
		{"msg-ring", true, []algo.Option{algo.WithAlgorithm(algo.Ring)}},
		{"direct-small", false, []algo.Option{algo.WithSmallBytes(1 << 40)}},
		{"direct-sliced", false, []algo.Option{algo.WithSmallBytes(-1)}},
	}
	for _, size := range crossoverSizes {
		for _, v := range variants {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, v.name), func(b *testing.B) { benchAllReduce(b, v, 4, size) })
		}
	}
}

var crossoverSizes = []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}
