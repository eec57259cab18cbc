package main

import (
	"fmt"
	"strconv"
)

// benchKey is a bench row's place, but for its topology.
type benchKey struct {
	rate      string
	perHost   int
	transport string
	algo      string
	op        string
	size      int64
}

// benchResults keeps the bench rows by place and topology, in the order
// they came, for the comparison of the two topologies.
type benchResults struct {
	keys []benchKey
	rows map[benchKey]map[bool]benchRow // by flat
}

// add records row b of group (r, per, v).
func (res *benchResults) add(r rate, per int, v variant, b benchRow) {
	k := benchKey{rate: r.String(), perHost: per, transport: v.asked(), algo: v.algo, op: b.op, size: b.size}
	if res.rows == nil {
		res.rows = make(map[benchKey]map[bool]benchRow)
	}
	if res.rows[k] == nil {
		res.rows[k] = make(map[bool]benchRow)
		res.keys = append(res.keys, k)
	}
	res.rows[k][v.flat] = b
}

// compareTopologies prints, for every place measured in both topologies,
// the bus bandwidth with the hosts as they are (two-level algorithms
// where the group allows them) over the flat one's: above 1, knowing the
// hosts moves more over the same capped links.
func (h *harness) compareTopologies(res benchResults) {
	cfg := h.cfg
	cols := []string{"op", "size", "hosts x ranks", "rate", "CHOREO_TRANSPORT"}
	if cfg.algoEnv != "" {
		cols = append(cols, cfg.algoEnv)
	}
	cols = append(cols, "busbw flat GB/s", "busbw hosts GB/s", "hosts / flat busbw", "p50 flat", "p50 hosts")
	t := h.rep.Table("hosts against flat: the same groups and links, the ranks seeing their hosts or one host per rank", cols...)
	for _, k := range res.keys {
		flat, okF := res.rows[k][true]
		hosts, okH := res.rows[k][false]
		if !okF || !okH {
			continue
		}
		cells := []string{k.op, sizeName(k.size), fmt.Sprintf("%d x %d", cfg.hosts, k.perHost), k.rate, k.transport}
		if cfg.algoEnv != "" {
			cells = append(cells, k.algo)
		}
		ratio := "-"
		if flat.busbw > 0 {
			ratio = strconv.FormatFloat(hosts.busbw/flat.busbw, 'f', 2, 64) + "x"
		}
		t.Row(append(cells, fmt.Sprintf("%.3f", flat.busbw), fmt.Sprintf("%.3f", hosts.busbw), ratio,
			micros(flat.p50), micros(hosts.p50))...)
	}
}
