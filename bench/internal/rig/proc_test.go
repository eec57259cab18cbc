package rig

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillAllEndsStoppedChildren: a child that is stopped (SIGSTOP), and
// the grandchild it started in its process group, both end on KillAll;
// the child's lines arrived with their times.
func TestKillAllEndsStoppedChildren(t *testing.T) {
	kids := NewChildren()
	p, err := StartProc(kids, "sh", []string{"sh", "-c", "sleep 60 & echo ready $!; wait"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	l, ok := p.Await(30*time.Second, func(s string) bool { return len(s) > 6 && s[:6] == "ready " })
	if !ok {
		t.Fatalf("no ready line: %q", p.Transcript(p.Started, ""))
	}
	if l.At.Before(p.Started) {
		t.Fatalf("line at %v, before the start %v", l.At, p.Started)
	}
	var grandchild int
	if _, err := fmt.Sscan(l.Text[6:], &grandchild); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	kids.KillAll()
	if !p.Wait(10 * time.Second) {
		t.Fatal("the stopped child outlived KillAll")
	}
	if ended, code, _ := p.Exited(); !ended || code != -1 {
		t.Fatalf("exited: %v, code %d, want killed (-1)", ended, code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(grandchild) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still there 10 s after KillAll", grandchild)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a process that has not ended (a zombie
// has ended; it waits only for its new parent to reap it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the name may hold spaces
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestStopRefusesNewChildren: after Stop, a start is refused with
// ErrStopped and its process never runs; before it, the same start runs.
func TestStopRefusesNewChildren(t *testing.T) {
	kids := NewChildren()
	p, err := StartProc(kids, "true", []string{"true"}, nil)
	if err != nil {
		t.Fatalf("before Stop: %v", err)
	}
	if !p.Wait(30 * time.Second) {
		t.Fatal("true did not end within 30 s")
	}
	kids.Stop()
	if _, err := StartProc(kids, "true", []string{"true"}, nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("after Stop: %v, want ErrStopped", err)
	}
	if n := kids.Len(); n != 0 {
		t.Fatalf("%d children registered after both ended or were refused", n)
	}
}
