package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// benchRow is one row of `demo node bench`'s table, as rank 0 prints it:
// op, bytes per rank, nccl-tests' batch time (timed ops back to back,
// mean) and bus bandwidth from it, the median single-op latency, and the
// wrong elements over all ranks.
type benchRow struct {
	op    string
	size  int64
	batch time.Duration
	p50   time.Duration
	busbw float64 // GB/s, from the batch time
	wrong int64
}

// busbwAtP50 is the bus bandwidth of the median single op.
func (r benchRow) busbwAtP50() float64 {
	if r.p50 <= 0 {
		return 0
	}
	return r.busbw * float64(r.batch) / float64(r.p50)
}

// opName is what an op's name looks like in the table.
var opName = regexp.MustCompile(`^[a-z][a-z_]*$`)

// parseBenchRow reads one line of demo bench's table (op, size(B), count,
// type, redop, time(us), p50(us), algbw, busbw, #wrong); other lines are
// not rows.
func parseBenchRow(s string) (benchRow, bool) {
	f := strings.Fields(s)
	if len(f) != 10 || !opName.MatchString(f[0]) {
		return benchRow{}, false
	}
	size, err1 := strconv.ParseInt(f[1], 10, 64)
	batch, err2 := strconv.ParseFloat(f[5], 64)
	p50, err3 := strconv.ParseFloat(f[6], 64)
	busbw, err4 := strconv.ParseFloat(f[8], 64)
	wrong, err5 := strconv.ParseInt(f[9], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
		return benchRow{}, false
	}
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	return benchRow{op: f[0], size: size, batch: us(batch), p50: us(p50), busbw: busbw, wrong: wrong}, true
}

// benchArgs is `demo node bench` with the harness's settings.
func (h *harness) benchArgs() []string {
	c := h.cfg
	return []string{"bench", "--backend=" + c.backend, "--ops=" + c.ops, "--sizes=" + c.sizes,
		"--iters=" + strconv.Itoa(c.iters), "--timeout=60s"}
}

// benchExperiment runs the sweep for every rate, ranks per host and
// variant; it reports whether every group finished with no wrong
// element. An error means the hosts could not be reshaped.
func (h *harness) benchExperiment() (bool, error) {
	cfg := h.cfg
	cols := append([]string{"op", "size", "hosts x ranks", "rate"}, cfg.variantCols()...)
	cols = append(cols, "joined with", "p50", "busbw GB/s", "busbw at p50 GB/s", "time (batch)", "link cap GB/s", "#wrong")
	t := h.rep.Table(fmt.Sprintf("bench: `demo node bench --ops %s --sizes %s`, %d hosts (rank 0's rows; busbw as nccl-tests, from the batch time)",
		cfg.ops, cfg.sizes, cfg.hosts), cols...)
	groups, ok := 0, 0
	var res benchResults
	for _, r := range cfg.rates {
		if err := h.net.setRate(r, cfg.burst); err != nil {
			return false, err
		}
		for _, per := range cfg.perHost {
			for _, v := range cfg.variants() {
				groups++
				lead := append([]string{fmt.Sprintf("%d x %d", cfg.hosts, per), r.String()}, cfg.cells(v)...)
				rows, joined, fail := h.benchGroup(per, v, r)
				if fail != "" {
					t.Row(append(append([]string{"FAILED", "-"}, lead...), fail)...)
					h.log.Warnw("bench", "group", lead, "failure", fail)
					continue
				}
				good := true
				for _, b := range rows {
					res.add(r, per, v, b)
					t.Row(append(append([]string{b.op, sizeName(b.size)}, lead...), joined, micros(b.p50),
						fmt.Sprintf("%.3f", b.busbw), fmt.Sprintf("%.3f", b.busbwAtP50()), micros(b.batch), capGBps(r),
						strconv.FormatInt(b.wrong, 10))...)
					good = good && b.wrong == 0
				}
				if good {
					ok++
				}
				h.log.Infow("bench", "group", lead, "rows", len(rows), "exact", good)
			}
		}
	}
	h.rep.Summarize("bench: %d of %d groups finished with every element exact", ok, groups)
	if len(cfg.topologies) == 2 {
		h.compareTopologies(res)
	}
	return ok == groups, nil
}

// benchGroup runs one sweep and returns rank 0's rows and the data planes
// the ranks joined with, or why it failed (the transcript's path in it).
func (h *harness) benchGroup(per int, v variant, r rate) (rows []benchRow, joined, fail string) {
	c, err := h.startCluster(v.spec(per, h.cfg.algoEnv, h.benchArgs()))
	if err != nil {
		return nil, "", err.Error()
	}
	defer c.ranks.Kill()
	tag := fmt.Sprintf("bench-%dx%d-%s-%s", h.cfg.hosts, per, r, v.tag())
	defer func() {
		if fail != "" {
			if p := h.saveLog(tag+".log", c.transcript()); p != "" {
				fail += " (" + p + ")"
			}
		}
	}()
	switch {
	case !c.ranks.WaitAll(h.cfg.timeout):
		if f := c.firstFailure(); f >= 0 {
			return nil, "", c.failure(f)
		}
		return nil, "", fmt.Sprintf("not done within %v: %s", h.cfg.timeout, c.failure(0))
	case c.firstFailure() >= 0:
		return nil, "", c.failure(c.firstFailure())
	}
	for _, l := range c.ranks[0].Lines() {
		if b, ok := parseBenchRow(l.Text); ok {
			rows = append(rows, b)
		}
	}
	if len(rows) == 0 {
		return nil, "", "rank 0 printed no row: " + lastLine(c.ranks[0], 300)
	}
	return rows, c.joined(), ""
}

// sizeName is a byte count as KiB, MiB or GiB where it divides evenly.
func sizeName(b int64) string {
	for _, u := range []struct {
		name  string
		bytes int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b >= u.bytes && b%u.bytes == 0 {
			return strconv.FormatInt(b/u.bytes, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(b, 10) + " B"
}

// micros is d as the tables show times: microseconds below 10 ms,
// milliseconds above.
func micros(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f us", float64(d)/1e3)
	}
	return fmt.Sprintf("%.2f ms", float64(d)/1e6)
}

// capGBps is r's cap in GB/s (1e9 B), "-" when off.
func capGBps(r rate) string {
	if r.bits == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", r.bytesPerSec()/1e9)
}
