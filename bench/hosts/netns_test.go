package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// helperEnv makes the test binary a helper process on a host instead of
// running tests: "recv ADDR" accepts one connection at ADDR and reports
// the bytes read and how long they took from the first to the end;
// "send ADDR N" dials ADDR (retrying for up to 10 s) and writes N bytes.
// Each first prints "host <its host name>".
const helperEnv = "CHOREO_HOSTS_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		if err := helper(strings.Fields(h)); err != nil {
			fmt.Println("helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(args []string) error {
	if len(args) > 0 && args[0] == "harness" { // the harness itself, as go run would start it
		cfg, err := parseConfig(args[1:])
		if err != nil {
			return err
		}
		os.Exit(run(cfg, rig.NewLogger()))
	}
	name, _ := os.Hostname()
	fmt.Println("host", name)
	switch {
	case len(args) == 2 && args[0] == "recv":
		ln, err := net.Listen("tcp", args[1])
		if err != nil {
			return err
		}
		fmt.Println("listening")
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		first := make([]byte, 1)
		if _, err := io.ReadFull(c, first); err != nil {
			return err
		}
		t0 := time.Now()
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			return err
		}
		fmt.Printf("got %d in %d ns\n", n+1, time.Since(t0).Nanoseconds())
		return nil
	case len(args) == 3 && args[0] == "send":
		size, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		var c net.Conn
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err = net.DialTimeout("tcp", args[1], time.Second); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return err
		}
		_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
		if _, err := c.Write(make([]byte, size)); err != nil {
			return err
		}
		return c.Close()
	}
	return fmt.Errorf("unknown helper command %q", args)
}

// ourNamespaces are the namespaces listed whose names start with prefix.
func ourNamespaces(t *testing.T, prefix string) []string {
	t.Helper()
	list, err := listNS()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// needRoot skips t where the harness cannot run.
func needRoot(t *testing.T) {
	t.Helper()
	if err := preflight(); err != nil {
		t.Skip(err)
	}
}

// TestNetworkHostsAndCap makes two hosts capped at 200 Mbit/s, checks
// that each helper runs under its host's name, that a stream from host 0
// to host 1 is no faster than the cap lets it be, and that close leaves
// no namespace behind.
func TestNetworkHostsAndCap(t *testing.T) {
	needRoot(t)
	run := "t" + rig.RandomHex(3)
	n := newNetwork(run, 2, zaptest.NewLogger(t).Sugar())
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = n.close()
		}
	})
	if err := n.setup(); err != nil {
		t.Fatal(err)
	}
	if got := ourNamespaces(t, nsPrefix+run); len(got) != 3 {
		t.Fatalf("namespaces %q, want the hub and 2 hosts", got)
	}
	r, _ := parseRate("200mbit")
	if err := n.setRate(r, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20 // at 25 MB/s: at least 0.33 s
	addr := net.JoinHostPort(n.addr(1), "5001")
	recv, err := rig.StartProc(kids, "recv", n.onHost(1, os.Args[0]), []string{helperEnv + "=recv " + addr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = recv.Signal(syscall.SIGKILL) }()
	if _, ok := recv.Await(30*time.Second, func(s string) bool { return s == "listening" }); !ok {
		t.Fatalf("receiver on host 1: %s", lastLine(recv, 300))
	}
	send, err := rig.StartProc(kids, "send", n.onHost(0, os.Args[0]), []string{helperEnv + "=send " + addr + " " + strconv.Itoa(size)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = send.Signal(syscall.SIGKILL) }()
	got, ok := recv.Await(60*time.Second, func(s string) bool { return strings.HasPrefix(s, "got ") })
	if !ok {
		t.Fatalf("receiver: %s; sender: %s", lastLine(recv, 300), lastLine(send, 300))
	}
	var bytes, ns int64
	if _, err := fmt.Sscanf(got.Text, "got %d in %d ns", &bytes, &ns); err != nil || bytes != size {
		t.Fatalf("receiver said %q (%v), want %d bytes", got.Text, err, size)
	}
	for p, want := range map[*rig.Proc]string{recv: "host host1", send: "host host0"} {
		if _, ok := p.Await(time.Second, func(s string) bool { return s == want }); !ok {
			t.Errorf("%s: no line %q (host name not set): %s", p.Name, want, lastLine(p, 300))
		}
	}
	// The receiver can have had at most the bucket and rate x time.
	least := time.Duration(float64(size-minBurst) / r.bytesPerSec() * 0.9 * float64(time.Second))
	took := time.Duration(ns)
	t.Logf("%d bytes host 0 -> host 1 in %v at %s: %.1f MB/s", size, took, r, float64(size)/took.Seconds()/1e6)
	if took < least {
		t.Errorf("%d bytes in %v: faster than the %s cap allows (at least %v)", size, took, r, least)
	}
	if !recv.Wait(10*time.Second) || !send.Wait(10*time.Second) {
		t.Error("helpers did not exit")
	}
	closed = true
	if err := n.close(); err != nil {
		t.Error(err)
	}
	if left := ourNamespaces(t, nsPrefix+run); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
}

// TestNetworkSetupFailureDeletesAll makes a setup fail half way (host 1's
// namespace name is taken) and checks that close deletes every namespace,
// the taken one included (the run's suffix is the harness's alone).
func TestNetworkSetupFailureDeletesAll(t *testing.T) {
	needRoot(t)
	run := "t" + rig.RandomHex(3)
	n := newNetwork(run, 3, zaptest.NewLogger(t).Sugar())
	if err := runCmd("ip", "netns", "add", n.ns(1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runCmd("ip", "netns", "del", n.ns(1)) })
	err := n.setup()
	if err == nil || !strings.Contains(err.Error(), n.ns(1)) {
		t.Errorf("setup: %v, want a failure naming %s", err, n.ns(1))
	}
	if err := n.close(); err != nil {
		t.Error(err)
	}
	if left := ourNamespaces(t, nsPrefix+run); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	if err := n.setup(); err == nil {
		t.Error("setup after close: no error")
	}
}

// madeLine matches the harness's log line that lists the namespaces it
// made, and takes their run's prefix.
var madeLine = regexp.MustCompile(`hosts made.*"(choreo-hosts-[0-9a-f]+-)hub"`)

// TestInterruptDeletesHosts starts the harness as a process, with a
// stand-in for the demo that only records its pid and sleeps, interrupts
// it (SIGINT, as Ctrl-C) once every rank runs, and checks that it exits
// 130 having killed every rank and deleted every namespace it made.
func TestInterruptDeletesHosts(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	demo := filepath.Join(dir, "demo")
	script := "#!/bin/sh\necho $$ >" + dir + "/rank.$CHOREO_RANK.pid\nexec sleep 120\n"
	if err := os.WriteFile(demo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := rig.StartProc(kids, "harness", []string{os.Args[0]}, []string{helperEnv + "=harness -demo " + demo + " -only bench -transports tcp -logs " + dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Signal(syscall.SIGKILL) }()
	made, ok := h.Await(60*time.Second, madeLine.MatchString)
	if !ok {
		t.Fatalf("no namespaces made: %s", lastLine(h, 300))
	}
	prefix := madeLine.FindStringSubmatch(made.Text)[1]
	var pids []int
	for deadline := time.Now().Add(30 * time.Second); len(pids) < 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 ranks started: %s", len(pids), lastLine(h, 300))
		}
		pids = pids[:0]
		for r := range 4 {
			if b, err := os.ReadFile(filepath.Join(dir, "rank."+strconv.Itoa(r)+".pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	if got := ourNamespaces(t, prefix); len(got) != 3 {
		t.Fatalf("namespaces %q while the ranks run, want the hub and 2 hosts", got)
	}
	if err := syscall.Kill(h.Pid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if !h.Wait(60 * time.Second) {
		t.Fatal("the harness did not exit within 60 s of SIGINT")
	}
	if _, code, _ := h.Exited(); code != exitStopped {
		t.Errorf("exit %d, want %d: %s", code, exitStopped, lastLine(h, 300))
	}
	if left := ourNamespaces(t, prefix); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}
	for r, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("rank %d (pid %d) still runs", r, pid)
		}
	}
}

// TestHarnessTwoHosts runs the whole harness, as `go run ./bench/hosts`
// would, on 2 hosts of 1 rank each (it builds the demo: only with
// CHOREO_TEST_FULL set, as CI runs): every experiment must pass, and no
// namespace of the run may be left.
func TestHarnessTwoHosts(t *testing.T) {
	needRoot(t)
	if v := os.Getenv("CHOREO_TEST_FULL"); v == "" || v == "0" || v == "false" { // testenv.FullEnv
		t.Skip("builds the demo and runs groups across hosts; CHOREO_TEST_FULL=1 runs it")
	}
	cfg, err := parseConfig([]string{"-ranks", "1", "-rates", "1gbit", "-transports", "auto", "-sizes", "1MiB",
		"-kill-tries", "2", "-kill-size", "4MiB", "-logs", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	if code := run(cfg, zap.New(core).Sugar()); code != exitOK {
		t.Errorf("exit %d, want %d", code, exitOK)
	}
	made := logs.FilterMessage("hosts made").All()
	if len(made) != 1 {
		t.Fatalf("%d 'hosts made' lines, want 1", len(made))
	}
	names, _ := made[0].ContextMap()["namespaces"].([]interface{})
	if len(names) != 3 {
		t.Fatalf("namespaces made: %v", made[0].ContextMap())
	}
	for _, n := range names {
		if slices.Contains(ourNamespaces(t, nsPrefix), n.(string)) {
			t.Errorf("left behind: %s", n)
		}
	}
}
