package actors_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
)

// TestSecondSignalExitsAtOnce: while the handler of a first SIGINT is still
// busy (its onSignal blocks), a second SIGINT ends the process at once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	if os.Getenv("CHOREO_SIGNAL_CHILD") == "twice" {
		rt, err := actors.NewRuntime(actors.WithSignalHandler(func(os.Signal) {
			fmt.Println("handling")
			time.Sleep(time.Minute)
		}))
		if err != nil {
			panic(err)
		}
		defer rt.Close()
		fmt.Println("ready")
		time.Sleep(time.Minute)
		os.Exit(3)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSignalExitsAtOnce$")
	cmd.Env = append(os.Environ(), "CHOREO_SIGNAL_CHILD=twice")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
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
	await := func(want string) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("child exited before %q", want)
				}
				if l == want {
					return
				}
			case <-timeout:
				t.Fatalf("child never printed %q", want)
			}
		}
	}
	await("ready")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	await("handling")
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		for range lines {
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
			t.Fatalf("child should die of SIGINT, got %v", err)
		}
		t.Logf("exited %v after the second signal", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("a second SIGINT did not end the process")
	}
}
