package algo

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// Topology is where the ranks of a group live. Hosts are numbered in the
// order of their lowest rank; a host's ranks are kept in rank order, the
// first of them its leader, and a rank's position among them is its local
// index. Only the grouping matters, not the identities' spelling: two host
// lists that group the ranks alike make equal topologies (the same
// Fingerprint).
//
// A Topology is immutable once made, and safe for concurrent use. Every
// rank of a group must make it from the same host list (the hierarchical
// algorithms' match compares Fingerprints, so ranks that disagree fail with
// ErrMismatch rather than exchange with the wrong peers).
type Topology struct {
	host  []int   // rank -> host index
	local []int   // rank -> local index
	ranks [][]int // host index -> its ranks, ascending
	fp    uint32
}

// NewTopology groups ranks by host: hosts[r] is rank r's host identity (a
// host name, a machine id: any string equal exactly for ranks on one
// host). An empty list or an empty identity fails with ErrBadArgument.
func NewTopology(hosts []string) (*Topology, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("algo: topology: no ranks: %w", ErrBadArgument)
	}
	t := &Topology{host: make([]int, len(hosts)), local: make([]int, len(hosts))}
	index := make(map[string]int, len(hosts))
	for r, id := range hosts {
		if id == "" {
			return nil, fmt.Errorf("algo: topology: rank %d has no host identity: %w", r, ErrBadArgument)
		}
		h, ok := index[id]
		if !ok {
			h = len(t.ranks)
			index[id] = h
			t.ranks = append(t.ranks, nil)
		}
		t.host[r], t.local[r] = h, len(t.ranks[h])
		t.ranks[h] = append(t.ranks[h], r)
	}
	f := fnv.New32a()
	_ = binary.Write(f, binary.LittleEndian, uint32(len(hosts)))
	for _, h := range t.host {
		_ = binary.Write(f, binary.LittleEndian, uint32(h))
	}
	t.fp = f.Sum32()
	return t, nil
}

// Size is the number of ranks.
func (t *Topology) Size() int { return len(t.host) }

// Hosts is the number of hosts.
func (t *Topology) Hosts() int { return len(t.ranks) }

// Host is the index of rank's host.
func (t *Topology) Host(rank int) int { return t.host[rank] }

// Local is rank's index among its host's ranks (0 for the leader).
func (t *Topology) Local(rank int) int { return t.local[rank] }

// Ranks is host h's ranks in rank order; the caller must not modify it.
func (t *Topology) Ranks(h int) []int { return t.ranks[h] }

// Leader is host h's lowest rank.
func (t *Topology) Leader(h int) int { return t.ranks[h][0] }

// Spans reports whether the group spans more than one host and some host
// holds more than one rank: where two levels can differ from one.
func (t *Topology) Spans() bool {
	if len(t.ranks) < 2 {
		return false
	}
	for _, rs := range t.ranks {
		if len(rs) > 1 {
			return true
		}
	}
	return false
}

// Even returns the number of ranks per host when every host holds the
// same number, or 0 when they differ.
func (t *Topology) Even() int {
	per := len(t.ranks[0])
	for _, rs := range t.ranks[1:] {
		if len(rs) != per {
			return 0
		}
	}
	return per
}

// Column is the ranks of local index j on each host, in host order (the
// ranks of one cross-host ring); a host with no rank j is left out.
func (t *Topology) Column(j int) []int {
	col := make([]int, 0, len(t.ranks))
	for _, rs := range t.ranks {
		if j < len(rs) {
			col = append(col, rs[j])
		}
	}
	return col
}

// Fingerprint is a hash of the grouping (which ranks share a host, the
// number of ranks), equal for equal groupings.
func (t *Topology) Fingerprint() uint32 { return t.fp }

func (t *Topology) String() string {
	return fmt.Sprintf("topology{%d ranks on %d hosts: %v}", len(t.host), len(t.ranks), t.ranks)
}
