//go:build linux

package nccl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu/cuda/nccl"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/cuda"
)

// The GPU tests run one-rank communicators (NCCL refuses two ranks on one
// GPU), so every reduction is the identity: they check the plumbing
// (pointers, counts, types, streams, groups, ends), and a guard region
// after each result catches a count or element size gone wrong. They skip
// only where this machine has no libnccl or no CUDA device.

// gpuN is the element count of the buffers: odd, so no size lines up.
const gpuN = 1021

// guardBytes follow every result buffer and must stay untouched.
const guardBytes = 256

const guardByte = 0xAB

// gpuEnv is one test's device, raw stream and communicator.
type gpuEnv struct {
	dev  *cuda.Device
	s    *cuda.RawStream
	comm *nccl.Comm
}

// needNCCL skips where no NCCL library opens.
func needNCCL(tb testing.TB) {
	tb.Helper()
	v, err := nccl.Version()
	if errors.Is(err, nccl.ErrUnavailable) {
		tb.Skipf("skipping: no NCCL library: %v", err)
	}
	if err != nil {
		tb.Fatalf("nccl.Version: %v", err)
	}
	p, _ := nccl.LibraryPath()
	tb.Logf("NCCL version code %d from %s", v, p)
}

// openGPU opens device 0 with a raw stream, skipping where there is no
// CUDA device; both are released when the test ends.
func openGPU(tb testing.TB) *gpuEnv {
	tb.Helper()
	needNCCL(tb)
	dev, err := cuda.New(cuda.Options{})
	if errors.Is(err, cuda.ErrUnavailable) {
		tb.Skipf("skipping: no CUDA driver or device: %v", err)
	}
	if err != nil {
		tb.Fatalf("cuda.New: %v", err)
	}
	tb.Cleanup(func() { _ = dev.Close() })
	s, err := dev.NewRawStream()
	if err != nil {
		tb.Fatalf("NewRawStream: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Destroy(); err != nil {
			tb.Errorf("stream Destroy: %v", err)
		}
	})
	return &gpuEnv{dev: dev, s: s}
}

// initOne makes a one-rank communicator on the device (destroyed when the
// test ends).
func (e *gpuEnv) initOne(tb testing.TB, opts ...nccl.Option) *nccl.Comm {
	tb.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		tb.Fatalf("nccl.NewUniqueID: %v", err)
	}
	if id.IsZero() {
		tb.Fatal("nccl.NewUniqueID gave a zero id")
	}
	comm, err := nccl.InitRank(id, 1, 0, append([]nccl.Option{nccl.WithDevice(e.dev)}, opts...)...)
	if err != nil {
		tb.Fatalf("nccl.InitRank: %v", err)
	}
	tb.Cleanup(func() {
		if err := comm.Destroy(); err != nil {
			tb.Errorf("Destroy at cleanup: %v", err)
		}
	})
	e.comm = comm
	return comm
}

// alloc returns a device buffer of n bytes and its address.
func (e *gpuEnv) alloc(tb testing.TB, n int) uintptr {
	tb.Helper()
	b, err := e.dev.Alloc(n, gpu.DeviceMem)
	if err != nil {
		tb.Fatalf("Alloc %d: %v", n, err)
	}
	tb.Cleanup(func() { _ = b.Free() }) // after the stream work: each helper synchronizes
	p, err := cuda.DevicePointer(b)
	if err != nil || p == 0 {
		tb.Fatalf("DevicePointer: %#x, %v", p, err)
	}
	return p
}

// sync waits for the stream, bounded.
func (e *gpuEnv) sync(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.s.Synchronize(ctx); err != nil {
		tb.Fatalf("Synchronize: %v", err)
	}
}

// staging returns a pinned host buffer of n bytes and its device address.
func (e *gpuEnv) staging(tb testing.TB, n int) (gpu.Buffer, uintptr) {
	tb.Helper()
	h, err := e.dev.Alloc(n, gpu.HostMem)
	if err != nil {
		tb.Fatalf("Alloc host %d: %v", n, err)
	}
	p, err := cuda.DevicePointer(h)
	if err != nil || p == 0 {
		tb.Fatalf("DevicePointer(host): %#x, %v", p, err)
	}
	return h, p
}

// upload writes data at dst and waits.
func (e *gpuEnv) upload(tb testing.TB, dst uintptr, data []byte) {
	tb.Helper()
	h, hp := e.staging(tb, len(data))
	defer h.Free()
	copy(h.Bytes(), data)
	if err := e.s.CopyAsync(dst, hp, len(data)); err != nil {
		tb.Fatalf("CopyAsync up: %v", err)
	}
	e.sync(tb)
}

// download reads n bytes at src after the stream's work.
func (e *gpuEnv) download(tb testing.TB, src uintptr, n int) []byte {
	tb.Helper()
	h, hp := e.staging(tb, n)
	defer h.Free()
	if err := e.s.CopyAsync(hp, src, n); err != nil {
		tb.Fatalf("CopyAsync down: %v", err)
	}
	e.sync(tb)
	return bytes.Clone(h.Bytes())
}

// pattern is n elements of dt, distinct and non-trivial, as bytes.
func pattern(dt nccl.DataType, n, seed int) []byte {
	b := make([]byte, n*dt.Size())
	for i := range n {
		v := (i*7+seed)%509 - 254
		switch dt {
		case nccl.Float32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)*0.5))
		case nccl.Int32:
			binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v*1000)))
		default:
			panic("pattern: type not used by the tests")
		}
	}
	return b
}

// filled is n bytes of guardByte.
func filled(n int) []byte { return bytes.Repeat([]byte{guardByte}, n) }

// result prepares a result buffer of want's size plus the guard, filled
// with guardByte.
func (e *gpuEnv) result(tb testing.TB, size int) uintptr {
	tb.Helper()
	p := e.alloc(tb, size+guardBytes)
	e.upload(tb, p, filled(size+guardBytes))
	return p
}

// input prepares a buffer holding data followed by the guard.
func (e *gpuEnv) input(tb testing.TB, data []byte) uintptr {
	tb.Helper()
	p := e.alloc(tb, len(data)+guardBytes)
	e.upload(tb, p, append(bytes.Clone(data), filled(guardBytes)...))
	return p
}

// expect checks that p holds want followed by an untouched guard.
func (e *gpuEnv) expect(tb testing.TB, what string, p uintptr, want []byte) {
	tb.Helper()
	got := e.download(tb, p, len(want)+guardBytes)
	if !bytes.Equal(got[:len(want)], want) {
		i := 0
		for i < len(want) && got[i] == want[i] {
			i++
		}
		tb.Errorf("%s: result differs from byte %d of %d", what, i, len(want))
	}
	if !bytes.Equal(got[len(want):], filled(guardBytes)) {
		tb.Errorf("%s: wrote past its %d bytes", what, len(want))
	}
}

func TestGPUOneRank(t *testing.T) {
	e := openGPU(t)
	c := e.initOne(t)
	if c.Count() != 1 || c.Rank() != 0 {
		t.Fatalf("Count %d Rank %d", c.Count(), c.Rank())
	}
	if err := c.AsyncError(); err != nil {
		t.Fatalf("AsyncError on a fresh communicator: %v", err)
	}
	stream := e.s.Handle()

	for _, dt := range []nccl.DataType{nccl.Float32, nccl.Int32} {
		for _, op := range []nccl.RedOp{nccl.Sum, nccl.Max} {
			data := pattern(dt, gpuN, int(op))
			t.Run(fmt.Sprintf("allreduce/%v/%v/out-of-place", dt, op), func(t *testing.T) {
				send := e.input(t, data)
				recv := e.result(t, len(data))
				if err := c.AllReduce(send, recv, gpuN, dt, op, stream); err != nil {
					t.Fatalf("AllReduce: %v", err)
				}
				e.expect(t, "recv", recv, data)
				e.expect(t, "send (unchanged)", send, data)
			})
			t.Run(fmt.Sprintf("allreduce/%v/%v/in-place", dt, op), func(t *testing.T) {
				buf := e.input(t, data)
				if err := c.AllReduce(buf, buf, gpuN, dt, op, stream); err != nil {
					t.Fatalf("AllReduce: %v", err)
				}
				e.expect(t, "buf", buf, data)
			})
		}
	}

	data := pattern(nccl.Float32, gpuN, 3)
	t.Run("allgather", func(t *testing.T) {
		send := e.input(t, data)
		recv := e.result(t, len(data)) // Count() == 1 blocks
		if err := c.AllGather(send, recv, gpuN, nccl.Float32, stream); err != nil {
			t.Fatalf("AllGather: %v", err)
		}
		e.expect(t, "recv", recv, data)
	})
	t.Run("reducescatter", func(t *testing.T) {
		send := e.input(t, data)
		recv := e.result(t, len(data))
		if err := c.ReduceScatter(send, recv, gpuN, nccl.Float32, nccl.Sum, stream); err != nil {
			t.Fatalf("ReduceScatter: %v", err)
		}
		e.expect(t, "recv", recv, data)
	})
	t.Run("broadcast", func(t *testing.T) {
		send := e.input(t, data)
		recv := e.result(t, len(data))
		if err := c.Broadcast(send, recv, gpuN, nccl.Float32, 0, stream); err != nil {
			t.Fatalf("Broadcast: %v", err)
		}
		e.expect(t, "recv", recv, data)
	})
	t.Run("reduce", func(t *testing.T) {
		idata := pattern(nccl.Int32, gpuN, 5)
		send := e.input(t, idata)
		recv := e.result(t, len(idata))
		if err := c.Reduce(send, recv, gpuN, nccl.Int32, nccl.Sum, 0, stream); err != nil {
			t.Fatalf("Reduce: %v", err)
		}
		e.expect(t, "recv", recv, idata)
	})
	t.Run("sendrecv-self", func(t *testing.T) {
		send := e.input(t, data)
		recv := e.result(t, len(data))
		err := nccl.Group(func() error {
			return errors.Join(c.Send(send, gpuN, nccl.Float32, 0, stream), c.Recv(recv, gpuN, nccl.Float32, 0, stream))
		})
		if err != nil {
			t.Fatalf("Send/Recv in a group: %v", err)
		}
		e.expect(t, "recv", recv, data)
	})
	t.Run("sendrecv-self-explicit-group", func(t *testing.T) {
		send := e.input(t, data)
		recv := e.result(t, len(data))
		if err := nccl.GroupStart(); err != nil {
			t.Fatalf("nccl.GroupStart: %v", err)
		}
		errSend := c.Send(send, gpuN, nccl.Float32, 0, stream)
		errRecv := c.Recv(recv, gpuN, nccl.Float32, 0, stream)
		if err := nccl.GroupEnd(); err != nil {
			t.Fatalf("nccl.GroupEnd: %v", err)
		}
		if errSend != nil || errRecv != nil {
			t.Fatalf("Send %v, Recv %v", errSend, errRecv)
		}
		e.expect(t, "recv", recv, data)
	})
	t.Run("bad-arguments", func(t *testing.T) {
		if err := c.Broadcast(1, 1, 1, nccl.Float32, 1, stream); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("root 1 of 1 rank: %v", err)
		}
		if err := c.AllReduce(0, 0, 1, nccl.Float32, nccl.Sum, stream); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("null buffers: %v", err)
		}
		if err := nccl.GroupEnd(); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("stray nccl.GroupEnd: %v", err)
		}
		if err := c.AsyncError(); err != nil {
			t.Errorf("AsyncError after the collectives: %v", err)
		}
	})

	// Abort ends it; calls then fail cleanly and ends are no-ops.
	e.sync(t)
	if err := c.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	buf := e.alloc(t, len(data))
	for name, err := range map[string]error{
		"AllReduce":  c.AllReduce(buf, buf, gpuN, nccl.Float32, nccl.Sum, stream),
		"Broadcast":  c.Broadcast(buf, buf, gpuN, nccl.Float32, 0, stream),
		"Send":       c.Send(buf, gpuN, nccl.Float32, 0, stream),
		"AsyncError": c.AsyncError(),
	} {
		if !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("%s after Abort: %v; want nccl.ErrClosed", name, err)
		}
	}
	if err := c.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("Destroy after Abort: %v", err)
	}
}

// Destroy with work just enqueued lets it finish; ends race safely.
func TestGPUDestroy(t *testing.T) {
	e := openGPU(t)
	c := e.initOne(t)
	data := pattern(nccl.Int32, gpuN, 9)
	send := e.input(t, data)
	recv := e.result(t, len(data))
	if err := c.AllReduce(send, recv, gpuN, nccl.Int32, nccl.Max, e.s.Handle()); err != nil {
		t.Fatalf("AllReduce: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			end := c.Destroy
			if i%2 == 1 {
				end = c.Abort
			}
			if err := end(); err != nil {
				t.Errorf("end %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	e.sync(t)
	if err := c.AllReduce(send, recv, gpuN, nccl.Int32, nccl.Max, e.s.Handle()); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("AllReduce after Destroy: %v", err)
	}
}

// childEnv selects the child process's scenario (TestGPUChild).
const childEnv = "CHOREO_NCCL_TEST_CHILD"

// childOK is what a child prints when its scenario passed.
const childOK = "NCCL-CHILD-OK"

// TestGPUChild is a child process's body, started by the tests below; it
// skips in a normal run.
func TestGPUChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("helper: runs in a child process of TestGPUInitByValue and TestGPUTwoProcesses")
	}
	e := openGPU(t)
	var opts []nccl.Option
	if mode == "byvalue" {
		opts = append(opts, nccl.ForceByValue)
	}
	c := e.initOne(t, opts...)
	data := pattern(nccl.Float32, gpuN, os.Getpid()%97)
	send := e.input(t, data)
	recv := e.result(t, len(data))
	for range 10 {
		if err := c.AllReduce(send, recv, gpuN, nccl.Float32, nccl.Sum, e.s.Handle()); err != nil {
			t.Fatalf("AllReduce: %v", err)
		}
	}
	e.expect(t, "recv", recv, data)
	if err := c.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if !t.Failed() {
		fmt.Printf("%s mode=%s pid=%d\n", childOK, mode, os.Getpid())
	}
}

// runChild runs this test binary's TestGPUChild in mode and returns its
// output; it fails the test unless the child passed.
func runChild(t *testing.T, mode string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGPUChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), childOK+" mode="+mode) {
		t.Errorf("child %s: %v\n%s", mode, err, out)
	}
	return string(out)
}

// ncclCommInitRank takes the unique id by value: the path for NCCL < 2.23,
// forced here on a newer library, in a child process so that an ABI slip
// crashes the child only.
func TestGPUInitByValue(t *testing.T) {
	openGPU(t) // skip where the child could not run
	runChild(t, "byvalue")
}

// Two processes each make a one-rank communicator at once, on the same
// GPU, and use it.
func TestGPUTwoProcesses(t *testing.T) {
	openGPU(t)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { runChild(t, "onerank") })
	}
	wg.Wait()
}

// The raw surface of gpu/cuda refuses bad arguments and works after its
// stream is gone only to say so.
func TestGPURawStream(t *testing.T) {
	e := openGPU(t)
	if _, err := cuda.DevicePointer(nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("DevicePointer(nil): %v", err)
	}
	b, err := e.dev.Alloc(64, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Free()
	if _, err := cuda.DevicePointer(b); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("DevicePointer(freed): %v", err)
	}
	if err := e.s.CopyAsync(0, 1, 4); !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("CopyAsync to null: %v", err)
	}
	if done, err := e.s.Query(); err != nil || !done {
		t.Errorf("Query on an idle stream: %v, %v", done, err)
	}
	s, err := e.dev.NewRawStream()
	if err != nil {
		t.Fatal(err)
	}
	if s.Handle() == 0 {
		t.Error("zero handle")
	}
	if err := s.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := s.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if s.Handle() != 0 {
		t.Error("handle after Destroy")
	}
	if err := s.Synchronize(context.Background()); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Synchronize after Destroy: %v", err)
	}
}
