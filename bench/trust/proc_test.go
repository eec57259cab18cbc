package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillAllEndsStoppedChildren: a child that is stopped (SIGSTOP), and
// the grandchild it started in its process group, both end on killAll;
// the child's lines arrived with their times.
func TestKillAllEndsStoppedChildren(t *testing.T) {
	p, err := startProc("sh", []string{"sh", "-c", "sleep 60 & echo ready $!; wait"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.kill()
	l, ok := p.await(30*time.Second, func(s string) bool { return len(s) > 6 && s[:6] == "ready " })
	if !ok {
		t.Fatalf("no ready line: %q", p.transcript(p.started, ""))
	}
	if l.at.Before(p.started) {
		t.Fatalf("line at %v, before the start %v", l.at, p.started)
	}
	var grandchild int
	if _, err := fmt.Sscan(l.text[6:], &grandchild); err != nil {
		t.Fatal(err)
	}
	if err := p.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	kids.killAll()
	if !p.wait(10 * time.Second) {
		t.Fatal("the stopped child outlived killAll")
	}
	if ended, code, _ := p.exited(); !ended || code != -1 {
		t.Fatalf("exited: %v, code %d, want killed (-1)", ended, code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(grandchild) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still there 10 s after killAll", grandchild)
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
