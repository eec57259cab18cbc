package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// rate is a link's cap in bits per second; 0 is no cap ("off"). name is
// how the command line said it, for the tables.
type rate struct {
	bits uint64
	name string
}

// rateUnits are the suffixes parseRate knows, as tc spells them.
var rateUnits = []struct {
	suffix string
	mult   float64
}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}

// parseRate reads "10gbit", "25gbit", "500mbit", "1.5gbit" or "off".
func parseRate(s string) (rate, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "off" || s == "none" {
		return rate{name: "off"}, nil
	}
	for _, u := range rateUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || v <= 0 || v*u.mult < 1e6 || v*u.mult > 1e12 {
			break
		}
		return rate{bits: uint64(v * u.mult), name: s}, nil
	}
	return rate{}, fmt.Errorf("hosts: rate %q: want a rate such as 10gbit, 25gbit or 500mbit (1mbit to 1000gbit), or off", s)
}

// bytesPerSec is the cap in bytes per second (0: none).
func (r rate) bytesPerSec() float64 { return float64(r.bits) / 8 }

// minBurst is the smallest token bucket the shaper gets: a few of the
// largest packets a veth passes at once (64 KiB with segmentation
// offload), so that one never waits for a bucket it cannot fill.
const minBurst = 256 << 10

// shaperLatency bounds how long a packet may wait in the shaper's queue
// (tbf's latency: the queue holds rate x latency bytes beyond the burst).
const shaperLatency = 10 * time.Millisecond

// tbfArgs is the tc command line (after "tc -n NS") that caps dev's
// egress at r with a bucket of r x burst (at least minBurst).
func (r rate) tbfArgs(dev string, burst time.Duration) []string {
	b := max(uint64(r.bytesPerSec()*burst.Seconds()), minBurst)
	return []string{"qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", strconv.FormatUint(r.bits, 10) + "bit",
		"burst", strconv.FormatUint(b, 10),
		"latency", strconv.FormatInt(shaperLatency.Microseconds(), 10) + "us"}
}

// String is the rate as the tables show it.
func (r rate) String() string { return r.name }
