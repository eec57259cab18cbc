package cluster

import (
	"errors"
	"github.com/choreo-gpu/choreo/internal/errs"
	"slices"
	"strings"
	"testing"
)

// roster builds a roster from "host:asked:carriers" per rank, carriers
// separated by '+' (each with a made-up address).
func roster(ranks ...string) Roster {
	r := Roster{Group: 1}
	for i, s := range ranks {
		f := strings.Split(s, ":")
		var data []string
		for _, c := range strings.Split(f[2], "+") {
			data = append(data, c+"=addr"+c)
		}
		r.Members = append(r.Members, Member{Rank: i, Host: f[0], Transport: f[1], Data: strings.Join(data, " ")})
	}
	return r
}

// TestPlanLinks: each pair takes shm inside a host and tcp across hosts
// under auto; a forced carrier links every pair or fails naming the pair
// it cannot; ranks that force different ones fail with ErrMismatch
// naming each rank's; every rank computes the same pairs.
func TestPlanLinks(t *testing.T) {
	mixed := roster("a::shm+tcp", "a:auto:shm+tcp", "b::shm+tcp", "b::shm+tcp")
	want := []map[string][]int{
		{"shm": {1}, "tcp": {2, 3}},
		{"shm": {0}, "tcp": {2, 3}},
		{"tcp": {0, 1}, "shm": {3}},
		{"tcp": {0, 1}, "shm": {2}},
	}
	for rank, w := range want {
		p, err := planLinks(mixed, rank)
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		for name, peers := range w {
			if !slices.Equal(p.peers[name], peers) {
				t.Errorf("rank %d: %s links %v, want %v", rank, name, p.peers[name], peers)
			}
		}
		if rank == 0 && p.String() != "0:self 1:shm 2:tcp 3:tcp" {
			t.Errorf("rank 0: %s", p)
		}
		if p.kinds != "shm+tcp" {
			t.Errorf("rank %d: kinds %q", rank, p.kinds)
		}
	}
	// A rank that cannot use shm links its host's peers by tcp.
	p, err := planLinks(roster("a::shm+tcp", "a::tcp"), 0)
	if err != nil || !slices.Equal(p.peers["tcp"], []int{1}) || p.kinds != "tcp" {
		t.Errorf("no shm on rank 1: %+v, %v", p, err)
	}
	// Forced tcp: every pair, also inside a host; an auto rank follows.
	p, err = planLinks(roster("a:tcp:tcp", "a::shm+tcp", "b:tcp:shm+tcp"), 1)
	if err != nil || !slices.Equal(p.peers["tcp"], []int{0, 2}) {
		t.Errorf("forced tcp: %+v, %v", p, err)
	}
	// Forced shm across hosts fails, naming the pair.
	_, err = planLinks(roster("a:shm:shm+tcp", "a:shm:shm+tcp", "b:shm:shm+tcp"), 0)
	if !errors.Is(err, errs.ErrBadArgument) || !strings.Contains(err.Error(), "ranks 0 and 2") {
		t.Errorf("shm across hosts: %v", err)
	}
	// Ranks that force different carriers: ErrMismatch naming each.
	_, err = planLinks(roster("a:tcp:shm+tcp", "a:shm:shm+tcp", "a::shm+tcp"), 2)
	if !errors.Is(err, errs.ErrMismatch) || !strings.Contains(err.Error(), "rank 0 tcp, rank 1 shm, rank 2 auto") {
		t.Errorf("mismatch: %v", err)
	}
	// An unknown carrier.
	if _, err := planLinks(roster("a:udp:tcp", "a::tcp"), 0); !errors.Is(err, errs.ErrBadArgument) {
		t.Errorf("udp: %v", err)
	}
	// Hosts unknown (empty) never share memory.
	p, err = planLinks(roster("::shm+tcp", "::shm+tcp"), 0)
	if err != nil || p.kinds != "tcp" {
		t.Errorf("empty hosts: %+v, %v", p, err)
	}
}
