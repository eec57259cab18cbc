package msg

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Carrier is one kind of link, registered by the package that provides it
// (from its init, as gpu backends are): a group then links each pair of
// ranks by the most preferred carrier both ranks have that reaches from
// one to the other.
type Carrier struct {
	// Name is what CHOREO_TRANSPORT and cluster.JoinConfig.Transport call
	// it; a pair takes the carrier of highest Preference both ranks have.
	Name       string
	Preference int
	// SameHost says the carrier reaches only ranks with this rank's host
	// identity; Supported (nil: always) whether this process can use it.
	SameHost  bool
	Supported func() bool
	// Prepare readies this rank before the ranks meet (a listener on
	// host, say): its Addr goes to every peer with the roster.
	Prepare func(host string) (Prepared, error)
}

// Prepared is a carrier readied by Prepare. Addr is where peers reach
// this rank ("" when they need nothing). Connect links this rank to
// s.Peers and returns the links by rank (nil for the others); it, or
// Close when Connect is not called, releases what Prepare took.
type Prepared interface {
	Addr() string
	Connect(ctx context.Context, s Setup) ([]Link, error)
	Close() error
}

// MinSecret is the shortest group secret a carrier accepts, and
// DefaultMaxBuffered the window a rank announces to each peer unless
// configured otherwise.
const (
	MinSecret          = 16
	DefaultMaxBuffered = 4 << 20
)

// EnvPoll is the variable that sets the most a wait polls for its peer
// before it parks (a Go duration; 0 turns polling off). Unset, a rank
// polls up to spin.MaxPoll where its host has a processor per local rank.
const EnvPoll = "CHOREO_POLL"

var carriers struct {
	mu  sync.Mutex
	all []Carrier
}

// Register adds a carrier; a second one of the same name panics (a
// programming error, at init).
func Register(c Carrier) {
	carriers.mu.Lock()
	defer carriers.mu.Unlock()
	if c.Name == "" || c.Prepare == nil {
		panic("msg: Register: a carrier needs a name and Prepare")
	}
	for _, o := range carriers.all {
		if o.Name == c.Name {
			panic(fmt.Sprintf("msg: Register: carrier %q registered twice", c.Name))
		}
	}
	carriers.all = append(carriers.all, c)
	slices.SortStableFunc(carriers.all, func(a, b Carrier) int { return b.Preference - a.Preference })
}

// Carriers returns the registered carriers this process supports, and
// Names all the registered ones' names, most preferred first.
func Carriers() []Carrier {
	carriers.mu.Lock()
	all := slices.Clone(carriers.all)
	carriers.mu.Unlock()
	return slices.DeleteFunc(all, func(c Carrier) bool { return c.Supported != nil && !c.Supported() })
}

// Lookup returns the registered carrier called name, whether supported
// here or not.
func Lookup(name string) (Carrier, bool) {
	carriers.mu.Lock()
	defer carriers.mu.Unlock()
	for _, c := range carriers.all {
		if c.Name == name {
			return c, true
		}
	}
	return Carrier{}, false
}

func Names() []string {
	carriers.mu.Lock()
	defer carriers.mu.Unlock()
	out := make([]string, len(carriers.all))
	for i, c := range carriers.all {
		out[i] = c.Name
	}
	return out
}

// ErrNoCarrier is returned when no carrier links a pair of ranks.
var ErrNoCarrier = fmt.Errorf("no transport links the pair: %w", transport.ErrBadArgument)
