package actors_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

func TestTwoRuntimesInOneProcess(t *testing.T) {
	a := testenv.Runtime(t)
	b := testenv.Runtime(t)
	if testenv.Fences(t, a) == testenv.Fences(t, b) || testenv.DefaultComm(t, a) == testenv.DefaultComm(t, b) {
		t.Fatal("runtimes share state")
	}
	dev := testenv.Device(t)
	f, err := testenv.Fences(t, a).New(dev)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.Fences(t, b).Live() != 0 || testenv.Fences(t, a).Live() != 1 {
		t.Fatalf("live fences: a=%d b=%d", testenv.Fences(t, a).Live(), testenv.Fences(t, b).Live())
	}
	f.Release()
}

func TestProtoactorLogsGoToZap(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	rt, err := actors.NewRuntime(actors.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	rt.ActorSystem().Logger().Info("hello from protoactor's slog")
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessage("hello from protoactor's slog").Len() != 1 {
		t.Fatalf("slog line not bridged into zap; got %d entries", logs.Len())
	}
}

func TestCloseIsIdempotentAndRefusesNewWork(t *testing.T) {
	rt, err := actors.NewRuntime(actors.WithCloseTimeout(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if !rt.Closed() {
		t.Fatal("Closed() false after Close")
	}
	dev := testenv.Device(t)
	if _, err := streams.NewGPU(rt, dev); !errors.Is(err, actors.ErrClosed) {
		t.Fatalf("new stream on closed runtime: %v", err)
	}
	if _, err := fence.For(rt); !errors.Is(err, actors.ErrClosed) {
		t.Fatalf("fence manager of a closed runtime: %v", err)
	}
}

// TestSignalReleasesFences runs this test binary as a child that holds a
// GPU wait on a fence, sends it SIGTERM, and checks that the handler
// released the fence (the GPU passed, the output failed) before the process
// died of the signal.
func TestSignalReleasesFences(t *testing.T) {
	if os.Getenv("CHOREO_SIGNAL_CHILD") == "1" {
		signalChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalReleasesFences$", "-test.v")
	cmd.Env = append(os.Environ(), "CHOREO_SIGNAL_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	timeout := time.After(20 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child exited early: %v", got)
			}
			got = append(got, l)
			ready = l == "ready"
		case <-timeout:
			t.Fatalf("child never got ready: %v", got)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		got = append(got, l)
	}
	err = cmd.Wait()
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "released=true") || !strings.Contains(all, "gpu-passed=true") || !strings.Contains(all, "output-failed=true") {
		t.Fatalf("handler did not release the fence before exit:\n%s", all)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("child should die of SIGTERM after the release, got %v", err)
	}
}

func signalChild() {
	var f *fence.Fence
	var out *array.Array
	var s *streams.GPU
	report := func(os.Signal) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		werr := out.Event().Wait(ctx)
		_, rerr := array.ToSlice[float32](ctx, out)
		fmt.Printf("released=%v gpu-passed=%v output-failed=%v\n", f.Released(), werr == nil, errors.Is(rerr, actors.ErrSignal))
	}
	rt, err := actors.NewRuntime(actors.WithSignalHandler(report))
	if err != nil {
		panic(err)
	}
	dev, err := testenvDevice()
	if err != nil {
		panic(err)
	}
	if s, err = streams.NewGPU(rt, dev); err != nil {
		panic(err)
	}
	mgr, err := fence.For(rt)
	if err != nil {
		panic(err)
	}
	if f, err = mgr.New(dev, fence.WithTimeout(time.Hour)); err != nil {
		panic(err)
	}
	out, _ = array.New(s, []int{4}, array.Float32)
	ev, err := f.WaitGPU(s, out)
	if err != nil {
		panic(err)
	}
	out.SetEvent(ev)
	fmt.Println("ready")
	time.Sleep(30 * time.Second) // the signal ends the process long before
	fmt.Println("no signal came")
	os.Exit(3)
}
