package cluster

import (
	"fmt"
	"slices"

	"github.com/choreo-gpu/choreo/wire"
)

// Version is the control protocol's version; ranks of another version are
// refused at the rendezvous.
const Version = 2

// Member is one rank of a Roster.
type Member struct {
	Rank    int
	Control string // the rank's control-plane (remoting) "host:port"
	Data    string // the rank's data-plane listener "host:port"
	Host    string // the rank's host name, for messages
	PID     int    // the rank's process id, for messages
	// Transport is the data plane the rank asked for ("auto", "tcp" or
	// "shm"; "" from a rank that did not say, which means "auto").
	Transport string
}

// Roster is the outcome of a rendezvous: every rank, indexed by rank, the
// group id every rank uses, and the group's epoch (0 for the group the
// rendezvous formed, one more each time its members grew it back with
// processes that took its lost ranks).
type Roster struct {
	Group   uint64
	Epoch   uint64
	Members []Member
}

// DataAddrs returns every rank's data-plane address, indexed by rank.
func (r Roster) DataAddrs() []string {
	out := make([]string, len(r.Members))
	for i, m := range r.Members {
		out[i] = m.Data
	}
	return out
}

// OneHost reports whether every rank said it runs on the same host (by
// host name), so that a same-host data plane can serve the group.
func (r Roster) OneHost() bool {
	for _, m := range r.Members {
		if m.Host == "" || m.Host != r.Members[0].Host {
			return false
		}
	}
	return len(r.Members) > 0
}

// rankAt is the rank whose control address is addr, or -1.
func (r Roster) rankAt(addr string) int {
	for _, m := range r.Members {
		if m.Control == addr {
			return m.Rank
		}
	}
	return -1
}

func (r Roster) String() string {
	if r.Epoch > 0 {
		return fmt.Sprintf("group %#x at epoch %d, %d ranks", r.Group, r.Epoch, len(r.Members))
	}
	return fmt.Sprintf("group %#x, %d ranks", r.Group, len(r.Members))
}

// toWire encodes r.
func (r Roster) toWire() *wire.Roster {
	w := &wire.Roster{Group: r.Group, Epoch: r.Epoch, Version: Version}
	for _, m := range r.Members {
		w.Members = append(w.Members, &wire.Member{Rank: uint32(m.Rank), ControlAddr: m.Control,
			DataAddr: m.Data, Host: m.Host, Pid: int32(m.PID), Transport: m.Transport})
	}
	return w
}

// rosterOf decodes w, checking that it lists ranks 0..size-1 once each.
func rosterOf(w *wire.Roster, size int) (Roster, error) {
	if len(w.GetMembers()) != size {
		return Roster{}, fmt.Errorf("roster of %d ranks for a world of %d", len(w.GetMembers()), size)
	}
	r := Roster{Group: w.GetGroup(), Epoch: w.GetEpoch(), Members: make([]Member, size)}
	seen := make([]bool, size)
	for _, m := range w.GetMembers() {
		k := int(m.GetRank())
		if k >= size || seen[k] {
			return Roster{}, fmt.Errorf("roster lists rank %d twice or out of range", k)
		}
		seen[k] = true
		r.Members[k] = Member{Rank: k, Control: m.GetControlAddr(), Data: m.GetDataAddr(),
			Host: m.GetHost(), PID: int(m.GetPid()), Transport: m.GetTransport()}
	}
	return r, nil
}

// ranksOf lists the ranks a partial roster names, sorted.
func ranksOf(w *wire.Roster) []int {
	var out []int
	for _, m := range w.GetMembers() {
		out = append(out, int(m.GetRank()))
	}
	slices.Sort(out)
	return out
}

// missing lists the ranks of 0..size-1 not in have.
func missing(have []int, size int) []int {
	var out []int
	for r := range size {
		if !slices.Contains(have, r) {
			out = append(out, r)
		}
	}
	return out
}
