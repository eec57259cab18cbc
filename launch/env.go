package launch

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/choreo-gpu/choreo/internal/localrank"
)

// The variables a launcher sets for each rank, which cluster.FromEnv
// reads.
const (
	EnvRank        = "CHOREO_RANK"        // the rank, 0 to world size - 1
	EnvLocalRank   = localrank.Env        // the rank's index among its node's ranks
	EnvWorldSize   = "CHOREO_WORLD_SIZE"  // every node's ranks
	EnvCoordinator = "CHOREO_COORDINATOR" // rank 0's control-plane host:port
	EnvSecret      = "CHOREO_SECRET"      // the ranks' shared secret
	EnvRun         = "CHOREO_RUN"         // the run's name
	// EnvRestartCount is how many times the launch started its ranks
	// again before this start (Spec.MaxRestarts): 0 the first time. In an
	// elastic launch, whose restarts are of lost ranks alone, it is how
	// many times this rank was started again: 0 for its first start.
	EnvRestartCount = "CHOREO_RESTART_COUNT"
	// EnvHostfile is the older way to give every rank's address up front
	// (a JSON list of host:port); a launcher removes it from what its
	// ranks inherit, since it would win over EnvCoordinator.
	EnvHostfile = "CHOREO_HOSTFILE"
)

// GoMaxProcs is the GOMAXPROCS each of n ranks gets on a host of cpus
// processors, as environment entries: the processors shared out, at least
// one each, as torchrun sets OMP_NUM_THREADS=1 for its ranks. Each rank's
// Go runtime would otherwise run as many threads as the host has
// processors, and a rank's wake-ups would wake idle threads whose
// spinning takes the processors its peers need. None where the user set
// GOMAXPROCS (set, the ranks inherit it).
func GoMaxProcs(n, cpus int, set string) []string {
	if set != "" || n < 1 {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(max(1, cpus/n))}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// derivedRun is the run name every node of a launch derives alike.
func derivedRun(secret, coordinator string) string {
	h := sha256.Sum256([]byte("choreo run\x00" + secret + "\x00" + coordinator))
	return "run-" + hex.EncodeToString(h[:6])
}

// inherited is this process's environment without the variables that
// would override what the launcher sets.
func inherited() []string {
	var env []string
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); k == EnvHostfile {
			continue
		}
		env = append(env, e)
	}
	return env
}

// lookup is the value of key in entries (the last one wins), or "".
func lookup(entries []string, key string) (string, bool) {
	v, found := "", false
	for _, e := range entries {
		if k, val, ok := strings.Cut(e, "="); ok && k == key {
			v, found = val, true
		}
	}
	return v, found
}

// splitHostPort splits "host:port"; port 0 when it is "0".
func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("coordinator %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("coordinator %q: bad port", addr)
	}
	return host, port, nil
}
