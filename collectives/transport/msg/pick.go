package msg

import (
	"fmt"
	"slices"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Auto is the transport a rank asks for when it lets each pair take the
// most preferred carrier that links it.
const Auto = "auto"

// Side is what the roster says of one rank: its host identity, the
// carriers it has readied, and the transport it asked for (Auto, or a
// carrier's name).
type Side struct {
	Rank     int
	Host     string
	Carriers []string
	Asked    string
}

// Pick chooses the carrier that links ranks a and b: the one both asked
// for, else (both Auto) the most preferred that both have and that
// reaches from one to the other; both ranks pick alike. It fails with
// ErrNoCarrier when none fits, with errs.ErrMismatch when the two asked
// for different carriers.
func Pick(a, b Side) (string, error) {
	asked := func(s Side) string {
		if s.Asked == "" {
			return Auto
		}
		return s.Asked
	}
	qa, qb := asked(a), asked(b)
	if qa != qb {
		return "", fmt.Errorf("%w: rank %d asks for transport %q, rank %d for %q", errs.ErrMismatch, a.Rank, qa, b.Rank, qb)
	}
	fits := func(c Carrier) error {
		switch {
		case !slices.Contains(a.Carriers, c.Name):
			return fmt.Errorf("rank %d (host %q) cannot use %s", a.Rank, a.Host, c.Name)
		case !slices.Contains(b.Carriers, c.Name):
			return fmt.Errorf("rank %d (host %q) cannot use %s", b.Rank, b.Host, c.Name)
		case c.SameHost && (a.Host == "" || a.Host != b.Host):
			return fmt.Errorf("%s links only ranks of one host, and ranks %d and %d are on hosts %q and %q", c.Name, a.Rank, b.Rank, a.Host, b.Host)
		}
		return nil
	}
	if qa != Auto {
		c, ok := Lookup(qa)
		if !ok {
			return "", fmt.Errorf("%w: transport %q is not one of %v", ErrNoCarrier, qa, Names())
		}
		if err := fits(c); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoCarrier, err)
		}
		return qa, nil
	}
	for _, name := range Names() {
		if c, _ := Lookup(name); fits(c) == nil {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w: ranks %d and %d (hosts %q and %q) share no transport: %v and %v",
		ErrNoCarrier, a.Rank, b.Rank, a.Host, b.Host, a.Carriers, b.Carriers)
}
