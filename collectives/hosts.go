package collectives

import (
	"fmt"
	"slices"

	"github.com/choreo-gpu/choreo/collectives/algo"
)

// WithHosts tells the group where its ranks live: hosts[r] is rank r's
// host identity, any string equal exactly for the ranks that share a host
// (Join passes its roster's host names). A group that spans hosts with more
// than one rank on some host then runs all-reduce (above
// algo.DefaultHierBytes), all-gather and reduce-scatter (above
// algo.DefaultHierGatherBytes) in two levels, inside each host and across
// hosts, on transports without PeerAccess; broadcast stays flat unless
// algo.Hierarchical is forced (algo.Hierarchical says which collectives
// and topologies); other calls keep the flat algorithms. Every rank must pass the same
// list, as long as the group (New and Local fail with ErrBadArgument
// otherwise); an empty identity (a rank whose host is unknown) leaves the
// group flat. A group Split from this one keeps its members' identities.
func WithHosts(hosts []string) Option {
	return func(c *config) { c.hosts = slices.Clone(hosts) }
}

// withTopology returns c with the algorithms' topology of c.hosts for a
// group of size ranks added to its algorithm options (after any earlier
// one, which it overrides: a subgroup's replaces its parent's).
func (c config) withTopology(size int) (config, error) {
	if c.hosts == nil {
		return c, nil
	}
	if len(c.hosts) != size {
		return c, fmt.Errorf("%d host identities for %d ranks: %w", len(c.hosts), size, ErrBadArgument)
	}
	var topo *algo.Topology
	if !slices.Contains(c.hosts, "") {
		var err error
		if topo, err = algo.NewTopology(c.hosts); err != nil {
			return c, err
		}
	}
	c.algo = append(c.algo[:len(c.algo):len(c.algo)], algo.WithTopology(topo))
	return c, nil
}

// hostsOf is the host identities of ranks (a subgroup's members, as
// ranks of its parent), or nil where the parent has none.
func hostsOf(hosts []string, ranks []int) []string {
	if hosts == nil {
		return nil
	}
	sub := make([]string, len(ranks))
	for i, r := range ranks {
		sub[i] = hosts[r]
	}
	return sub
}
