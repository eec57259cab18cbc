package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		bits uint64
	}{{"10gbit", 10e9}, {"25gbit", 25e9}, {" 500mbit ", 500e6}, {"1.5gbit", 1.5e9}, {"2000000kbit", 2e9}, {"off", 0}, {"none", 0}} {
		r, err := parseRate(c.in)
		if err != nil || r.bits != c.bits {
			t.Errorf("parseRate(%q) = %d, %v; want %d", c.in, r.bits, err, c.bits)
		}
	}
	for _, bad := range []string{"", "10", "10gbps", "0gbit", "-1gbit", "100kbit", "2000gbit", "gbit", "x10gbit"} {
		if r, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) = %d bits, want an error", bad, r.bits)
		}
	}
}

func TestTbfArgs(t *testing.T) {
	r, _ := parseRate("10gbit")
	got := r.tbfArgs("eth0", time.Millisecond)
	want := []string{"qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "10000000000bit", "burst", "1250000", "latency", "10000us"}
	if !slices.Equal(got, want) {
		t.Errorf("10gbit, 1ms: %q, want %q", got, want)
	}
	r, _ = parseRate("100mbit") // 12.5 kB in 1 ms: the floor
	if got := r.tbfArgs("v0", time.Millisecond); got[9] != "262144" {
		t.Errorf("100mbit, 1ms: burst %s, want the floor 262144", got[9])
	}
}

// demoBenchOutput is rank 0's output of `demo node bench` (with the
// logger's lines a rank run with --verbose prints among them).
const demoBenchOutput = `2026-12-04T05:44:02.523Z	INFO	choreo	collectives/join.go:141	joined	{"rank": 0, "rank": 0, "size": 4, "source": "choreo", "transport": "tcp", "peer_timeout": "10s"}
choreo bench: 4 ranks, one process each, on choreo software GPU (sim), 20 GiB, float32
data path: host (the CPU sees device memory: no staging)
               op   size(B)     count     type  redop   time(us)    p50(us)  algbw GB/s  busbw GB/s  #wrong
        allreduce   1048576    262144  float32    sum     8061.2     6338.9       0.130       0.195       0
        allreduce  67108864  16777216  float32    sum   163960.4   171470.0       0.409       0.614       3
  memcpy (1 core)  67108864                               9123.0                  7.356
2 ranks (processes), 1-element float32 all-reduce, end to end: p50 13.5 us, p90 42.5 us (target <= 10 us on sim)`

func TestParseBenchRow(t *testing.T) {
	var rows []benchRow
	for _, l := range strings.Split(demoBenchOutput, "\n") {
		if b, ok := parseBenchRow(l); ok {
			rows = append(rows, b)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want the 2 allreduce rows: %+v", len(rows), rows)
	}
	b := rows[1]
	if b.op != "allreduce" || b.size != 64<<20 || b.p50 != 171470*time.Microsecond || b.batch != 163960400*time.Nanosecond ||
		b.busbw != 0.614 || b.wrong != 3 {
		t.Errorf("row %+v", b)
	}
	if got := b.busbwAtP50(); got < 0.586 || got > 0.588 {
		t.Errorf("busbw at p50 %.4f, want 0.614 x 163.96/171.47 = 0.587", got)
	}
	if m := joinedTransport.FindStringSubmatch(strings.Split(demoBenchOutput, "\n")[0]); m == nil || m[1] != "tcp" {
		t.Errorf("joined line: transport %v, want tcp", m)
	}
}

func TestCheckDone(t *testing.T) {
	m := checkDone.FindStringSubmatch("CHECK done ok=505 failed=0 live-fences=0")
	if m == nil || m[1] != "505" || m[2] != "0" || m[3] != "0" {
		t.Errorf("matched %q", m)
	}
	if checkDone.MatchString("CHECK soak/3 FAIL ErrPeerLost rank 2 lost") {
		t.Error("a step's line taken for the last line")
	}
}

func TestConfig(t *testing.T) {
	c, err := parseConfig([]string{"-ranks", "2,4", "-rates", "10gbit,25gbit,off", "-transports", "tcp,auto,-",
		"-algo-env", "CHOREO_ALGO", "-algos", "ring,hier", "-env", "CHOREO_PEER_TIMEOUT=5s"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.perHost, []int{2, 4}) || len(c.rates) != 3 || c.rates[2].bits != 0 || !slices.Equal(c.env, []string{"CHOREO_PEER_TIMEOUT=5s"}) {
		t.Errorf("config %+v", c)
	}
	vs := c.variants()
	if len(vs) != 12 || vs[0] != (variant{"tcp", false, "ring"}) || vs[3] != (variant{"tcp", true, "hier"}) ||
		vs[11] != (variant{"", true, "hier"}) || vs[11].asked() != "(unset)" || vs[11].tag() != "(unset)-flat-hier" {
		t.Errorf("variants %+v", vs)
	}
	if s := vs[1].spec(2, c.algoEnv, []string{"bench"}); !slices.Equal(s.env, []string{"CHOREO_ALGO=hier"}) || s.flat || s.perHost != 2 {
		t.Errorf("spec %+v", s)
	}
	if got := c.cells(vs[3]); !slices.Equal(got, []string{"tcp", "flat", "hier"}) {
		t.Errorf("cells %q", got)
	}
	c, err = parseConfig([]string{"-topology", "flat"})
	if err != nil || len(c.variants()) != 2 || !c.variants()[1].flat || len(c.variantCols()) != 2 {
		t.Errorf("-topology flat: %+v, %v", c.variants(), err)
	}
	for _, bad := range [][]string{{"-algos", "ring"}, {"-transports", "udp"}, {"-ranks", "0"}, {"-rates", "fast"},
		{"-env", "NOEQUALS"}, {"-only", "bench,fly"}, {"-hosts", "0"}, {"-topology", "ring"}, {"extra"}} {
		if _, err := parseConfig(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSizeName(t *testing.T) {
	for in, want := range map[int64]string{4096: "4 KiB", 64 << 20: "64 MiB", 1 << 30: "1 GiB", 1000: "1000 B", 1536: "1536 B"} {
		if got := sizeName(in); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestPairCarriers(t *testing.T) {
	lines := []string{
		`INFO	choreo	collectives/join.go:142	joined	{"rank": 0, "transport": "shm+tcp", "links": "0:self 1:shm 2:tcp 3:tcp", "peer_timeout": "10s"}`,
		`INFO	choreo	collectives/join.go:142	joined	{"rank": 1, "transport": "shm+tcp", "links": "0:shm 1:self 2:tcp 3:tcp", "peer_timeout": "10s"}`,
		`INFO	choreo	collectives/join.go:142	joined	{"rank": 2, "transport": "shm+tcp", "links": "0:tcp 1:tcp 2:self 3:shm", "peer_timeout": "10s"}`,
		`INFO	choreo	collectives/join.go:142	joined	{"rank": 3, "transport": "shm+tcp", "links": "0:tcp 1:tcp 2:tcp 3:self", "peer_timeout": "10s"}`,
	}
	c := &cluster{hostOf: []int{0, 0, 1, 1}}
	for _, l := range lines {
		c.ranks = append(c.ranks, rig.ProcOf("rank", "choreo bench", l))
	}
	if got, want := c.joined(), "shm+tcp (same host shm+tcp, across tcp)"; got != want {
		t.Errorf("joined %q, want %q (rank 3 links its host's rank 2 by tcp)", got, want)
	}
	c.ranks[3] = rig.ProcOf("rank 3", "choreo bench", lines[3][:strings.Index(lines[3], "0:tcp")]+`0:tcp 1:tcp 2:shm 3:self"}`)
	if got, want := c.joined(), "shm+tcp (same host shm, across tcp)"; got != want {
		t.Errorf("joined %q, want %q", got, want)
	}
	c = &cluster{hostOf: []int{0, 1}, ranks: rig.Ranks{rig.ProcOf("rank 0", `joined	{"rank": 0, "transport": "tcp", "peer_timeout": "10s"}`)}}
	if got := c.joined(); got != "tcp" {
		t.Errorf("without links: %q, want tcp", got)
	}
}

func TestFirstFew(t *testing.T) {
	if got := rig.FirstFew([]string{"a", "b", "c", "d"}, 2); got != "a; b; ... 2 more" {
		t.Errorf("%q", got)
	}
	if got := rig.FirstFew([]string{"a"}, 2); got != "a" {
		t.Errorf("%q", got)
	}
}
