package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/internal/spin"
	"go.uber.org/zap"
)

// dataPlane is a transport a peer can be declared lost on.
type dataPlane interface {
	transport.Transport
	LosePeer(rank int, cause error)
}

// readied holds the carriers this rank readied before the rendezvous:
// each registered carrier this process supports (only the one asked for,
// when one is), by name, most preferred first.
type readied struct {
	names []string
	prep  map[string]msg.Prepared
}

// prepareCarriers readies the carriers for a rank on host that asked for
// transport asked ("auto" or a carrier's name). A carrier that fails to
// ready is left out under auto (the others may serve), and fails Join
// when it is the one asked for.
func prepareCarriers(host, asked string) (*readied, error) {
	r := &readied{prep: map[string]msg.Prepared{}}
	var failed []error
	for _, c := range msg.Carriers() {
		if asked != msg.Auto && c.Name != asked {
			continue
		}
		p, err := c.Prepare(host)
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", c.Name, err))
			continue
		}
		r.names = append(r.names, c.Name)
		r.prep[c.Name] = p
	}
	if len(r.names) == 0 {
		if len(failed) == 0 {
			return nil, fmt.Errorf("%w: transport %q is not available here (registered: %v)", errs.ErrBadArgument, asked, msg.Names())
		}
		return nil, fmt.Errorf("data plane: %w", errors.Join(failed...))
	}
	return r, nil
}

// addr is what the roster carries of this rank's data plane: each readied
// carrier's name and address, "name=addr" separated by spaces.
func (r *readied) addr() string {
	parts := make([]string, len(r.names))
	for i, n := range r.names {
		parts[i] = n + "=" + r.prep[n].Addr()
	}
	return strings.Join(parts, " ")
}

// close releases the carriers not connected.
func (r *readied) close() {
	for _, p := range r.prep {
		_ = p.Close()
	}
	clear(r.prep)
}

// carrierAddrs parses a roster member's data plane: carrier name to
// address.
func carrierAddrs(data string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(data) {
		name, addr, _ := strings.Cut(f, "=")
		out[name] = addr
	}
	return out
}

// groupAsk is the transport the ranks of roster asked for: msg.Auto when
// none forced one, else the one some forced (ranks that left it to auto
// follow it); errs.ErrMismatch, naming each rank's, when ranks forced
// different ones.
func groupAsk(roster Roster) (string, error) {
	forced := ""
	differ := false
	for _, m := range roster.Members {
		switch k := m.Transport; {
		case k == "" || k == msg.Auto:
		case forced == "":
			forced = k
		case k != forced:
			differ = true
		}
	}
	if !differ {
		if forced == "" {
			return msg.Auto, nil
		}
		if _, ok := msg.Lookup(forced); !ok {
			return "", fmt.Errorf("%w: transport %q (want auto or one of %v)", errs.ErrBadArgument, forced, msg.Names())
		}
		return forced, nil
	}
	named := make([]string, len(roster.Members))
	for i, m := range roster.Members {
		k := m.Transport
		if k == "" {
			k = msg.Auto
		}
		named[i] = fmt.Sprintf("rank %d %s", m.Rank, k)
	}
	return "", fmt.Errorf("%w: the ranks' data plane transports differ: %s", errs.ErrMismatch, strings.Join(named, ", "))
}

// linkPlan is the carrier of every pair of ranks: carrier name to the
// peers of rank it links, and a summary ("shm", "tcp", "shm+tcp").
type linkPlan struct {
	peers map[string][]int
	kinds string
	by    []string            // by rank: the carrier of the pair, "self" at rank
	addrs map[string][]string // by carrier: every rank's address, by rank
}

// String lists each peer's carrier: "0:self 1:shm 2:tcp".
func (p linkPlan) String() string {
	parts := make([]string, len(p.by))
	for k, name := range p.by {
		parts[k] = fmt.Sprintf("%d:%s", k, name)
	}
	return strings.Join(parts, " ")
}

// planLinks picks the carrier of every pair of roster's ranks (each rank
// computes every pair, so all fail alike on the first pair none links)
// and returns rank's part.
func planLinks(roster Roster, rank int) (linkPlan, error) {
	ask, err := groupAsk(roster)
	if err != nil {
		return linkPlan{}, err
	}
	sides := make([]msg.Side, len(roster.Members))
	plan := linkPlan{peers: map[string][]int{}, by: make([]string, len(sides)), addrs: map[string][]string{}}
	for i, m := range roster.Members {
		addrs := carrierAddrs(m.Data)
		names := make([]string, 0, len(addrs))
		for n, a := range addrs {
			names = append(names, n)
			if plan.addrs[n] == nil {
				plan.addrs[n] = make([]string, len(roster.Members))
			}
			plan.addrs[n][i] = a
		}
		sort.Strings(names)
		sides[i] = msg.Side{Rank: m.Rank, Host: m.Host, Carriers: names, Asked: ask}
	}
	plan.by[rank] = "self"
	for i := range sides {
		for j := i + 1; j < len(sides); j++ {
			name, err := msg.Pick(sides[i], sides[j])
			if err != nil {
				return linkPlan{}, err
			}
			switch rank {
			case i:
				plan.peers[name] = append(plan.peers[name], j)
				plan.by[j] = name
			case j:
				plan.peers[name] = append(plan.peers[name], i)
				plan.by[i] = name
			}
		}
	}
	kinds := make([]string, 0, len(plan.peers))
	for n := range plan.peers {
		kinds = append(kinds, n)
	}
	slices.Sort(kinds)
	plan.kinds = strings.Join(kinds, "+")
	if plan.kinds == "" {
		plan.kinds = "none"
	}
	return plan, nil
}

// connectLinks connects rank's links, every carrier of plan at once (a
// peer may be waiting on any of them), and returns them indexed by rank.
// It releases every readied carrier.
func connectLinks(ctx context.Context, r *readied, plan linkPlan, roster Roster, base msg.Setup) ([]msg.Link, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	links := make([]msg.Link, len(roster.Members))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for name, p := range r.prep {
		peers := plan.peers[name]
		if len(peers) == 0 {
			_ = p.Close()
			continue
		}
		s := base
		s.Peers = peers
		s.Addrs = plan.addrs[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls, err := p.Connect(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				cancel()
				return
			}
			for _, k := range peers {
				links[k] = ls[k]
			}
		}()
	}
	wg.Wait()
	clear(r.prep)
	if len(errs) > 0 {
		for _, l := range links {
			if l != nil {
				l.Close()
			}
		}
		return nil, errors.Join(errs...)
	}
	return links, nil
}

// connectDataPlane builds rank's data plane over roster: a link per peer
// by plan's carriers, under one message layer, which logs its losses of
// peers to log. A peer not heard yet has until ctx's deadline (the
// Join's) to start its message layer: the ranks finish connecting at
// different times, and a large group on a loaded host takes seconds.
func (c JoinConfig) connectDataPlane(ctx context.Context, r *readied, roster Roster, plan linkPlan, pt time.Duration, log *zap.Logger) (dataPlane, error) {
	links, err := connectLinks(ctx, r, plan, roster, c.setup(roster, pt))
	if err != nil {
		return nil, err
	}
	ec := c.endpointConfig(roster, plan, pt)
	if d, ok := ctx.Deadline(); ok {
		ec.StartTimeout = max(pt, time.Until(d))
	}
	ec.Logger = log
	e, err := msg.New(ec, links)
	if err != nil {
		for _, l := range links {
			if l != nil {
				l.Close()
			}
		}
		return nil, err
	}
	return linked{e, plan.by}, nil
}

// setup is what the carriers know of the group (Peers and Addrs apart).
func (c JoinConfig) setup(roster Roster, pt time.Duration) msg.Setup {
	return msg.Setup{Rank: c.Rank, Size: c.Size, Group: roster.Group, Run: fmt.Sprintf("%s-%x", c.Run, roster.Group),
		Secret: c.Secret, PeerTimeout: pt, MaxBuffered: msg.DefaultMaxBuffered}
}

// endpointConfig is the message layer's configuration: named after the
// one carrier of plan ("msg" for several), polling where this host has a
// processor per rank of it.
func (c JoinConfig) endpointConfig(roster Roster, plan linkPlan, pt time.Duration) msg.Config {
	name := plan.kinds
	if strings.Contains(name, "+") {
		name = "msg"
	}
	local := 0
	for _, m := range roster.Members {
		if m.Host == roster.Members[c.Rank].Host {
			local++
		}
	}
	return msg.Config{Rank: c.Rank, Size: c.Size, Name: name, MaxBuffered: msg.DefaultMaxBuffered,
		PeerTimeout: pt, HeartbeatInterval: min(pt/4, heartbeat), Poll: spin.PollBudget(msg.EnvPoll, local)}
}

// heartbeat is how often an idle data plane pings its peers and judges
// their silence (or a quarter of the peer timeout, when that is shorter).
const heartbeat = 250 * time.Millisecond

// linked is a Join's data plane: the message layer, which also tells the
// carrier of each peer's link (traces show it).
type linked struct {
	*msg.Endpoint
	by []string
}

// Via names the carrier of peer's link.
func (l linked) Via(peer int) string {
	if peer < 0 || peer >= len(l.by) {
		return ""
	}
	return l.by[peer]
}
