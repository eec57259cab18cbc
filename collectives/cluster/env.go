package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/launch"
)

// JoinConfig says how this process finds the other ranks of its group.
// FromEnv fills it from the variables a launcher set; a program may build
// one itself.
//
// The ranks meet at a rendezvous hosted by rank 0's control plane: rank 0
// listens at Hosts[0] (or Coordinator); every other rank listens at
// Hosts[rank] (or, with only a Coordinator, at a free port of the address
// that reaches it) and says hello to rank 0, which answers, once every
// rank is there, with the roster: every rank's control and data address
// and a group id chosen for this run.
type JoinConfig struct {
	// Rank is this process's rank, 0 <= Rank < Size.
	Rank, Size int
	// Hosts holds every rank's control-plane "host:port", indexed by rank
	// (CHOREO_HOSTFILE). When empty, Coordinator names rank 0's.
	Hosts []string
	// Coordinator is rank 0's control-plane "host:port" when Hosts is
	// empty (torchrun's MASTER_ADDR:MASTER_PORT, or CHOREO_COORDINATOR).
	Coordinator string
	// Secret is shared by every rank (at least 16 bytes): the control
	// plane's streams and the data plane's connections prove it.
	Secret []byte
	// Run names this run; ranks of another run refuse each other.
	Run string
	// Timeout bounds the whole of Join (rendezvous and connections).
	// Default 60 s.
	Timeout time.Duration
	// Transport picks the data plane (CHOREO_TRANSPORT): "auto" or ""
	// links each pair of ranks by the best carrier both have, shared
	// memory ("shm") between ranks of one host and TCP ("tcp") between
	// hosts; a carrier's name links every pair by it, and Join fails,
	// naming the pair, where it cannot (shm across hosts). Ranks that
	// leave it to auto follow a rank that names one; where ranks name
	// different ones, every rank's Join fails with ErrMismatch naming
	// them.
	Transport string
	// HostID is this rank's host identity (CHOREO_HOST_ID): ranks of one
	// identity count as one host (shared memory links them, and the
	// collectives' hierarchical algorithms group them). Empty: this
	// machine's. Set it to make one machine act as several hosts (tests),
	// or to keep ranks of one machine apart.
	HostID string
	// PeerTimeout is how long a peer may stay silent before it is lost,
	// on the control and data planes alike (CHOREO_PEER_TIMEOUT, a Go
	// duration such as 10s). Default DefaultPeerTimeout.
	PeerTimeout time.Duration
	// Source names where the configuration came from: "choreo",
	// "torchrun", "openmpi", "slurm" or "" when built by hand.
	Source string
	// Err is what FromEnv could not read; Join reports it.
	Err error
}

// DefaultJoinTimeout is JoinConfig.Timeout's default.
const DefaultJoinTimeout = 60 * time.Second

// DefaultPeerTimeout is the peer timeout when JoinConfig.PeerTimeout sets
// none.
const DefaultPeerTimeout = remoting.DefaultPeerTimeout

// Environment variables read by FromEnv. The launch package sets the
// first six.
const (
	EnvRank        = launch.EnvRank
	EnvWorldSize   = launch.EnvWorldSize
	EnvCoordinator = launch.EnvCoordinator
	EnvSecret      = launch.EnvSecret
	EnvRun         = launch.EnvRun
	EnvHostfile    = launch.EnvHostfile
	EnvJoinTimeout = "CHOREO_JOIN_TIMEOUT"
	EnvTransport   = "CHOREO_TRANSPORT"
	EnvPeerTimeout = "CHOREO_PEER_TIMEOUT"
	EnvHostID      = "CHOREO_HOST_ID"
)

// launcherVars is each launcher's rank and world-size variables, in the
// order FromEnv tries them: choreo's first, so that they win when set.
var launcherVars = []struct{ source, rank, size string }{
	{"choreo", EnvRank, EnvWorldSize},
	{"torchrun", "RANK", "WORLD_SIZE"},
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS"},
}

// FromEnv reads this process's JoinConfig from the environment, from the
// variables of whichever launcher started it; where several launchers'
// variables are set, each value comes from the first of them that holds
// it, choreo's winning:
//   - the rank: CHOREO_RANK, else torchrun's RANK, Open MPI's
//     OMPI_COMM_WORLD_RANK, Slurm's SLURM_PROCID (the local rank, for a
//     GPU's choice, is LocalRank's: CHOREO_LOCAL_RANK, LOCAL_RANK,
//     OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID);
//   - the world size: CHOREO_WORLD_SIZE, WORLD_SIZE, OMPI_COMM_WORLD_SIZE,
//     SLURM_NTASKS;
//   - where rank 0 hosts the rendezvous: CHOREO_HOSTFILE (every rank's
//     "host:port", a JSON list indexed by rank, as a path or inline), else
//     CHOREO_COORDINATOR (rank 0's "host:port"; every other rank binds a
//     free port and reports it), else MASTER_ADDR and MASTER_PORT (under
//     torchrun's agent, TORCHELASTIC_RUN_ID set, at MASTER_PORT+1: the
//     agent's own store holds MASTER_PORT). Open MPI and Slurm give their
//     ranks no shared address, so there one of these must be passed on
//     (`mpirun -x CHOREO_COORDINATOR`);
//   - the run: CHOREO_RUN, else TORCHELASTIC_RUN_ID, Open MPI's job
//     (PMIX_NAMESPACE), Slurm's job and step.
//
// CHOREO_SECRET is always needed (pass it on: `mpirun -x CHOREO_SECRET`);
// CHOREO_JOIN_TIMEOUT, CHOREO_TRANSPORT, CHOREO_PEER_TIMEOUT and
// CHOREO_HOST_ID are optional. What cannot be read is left in Err, naming
// the variable; Join reports it.
func FromEnv() JoinConfig { return fromEnv(os.Getenv) }

// fromEnv is FromEnv over any lookup.
func fromEnv(get func(string) string) JoinConfig {
	c, err := launcherEnv(get)
	if err == nil {
		err = commonEnv(get, &c)
	}
	if err != nil {
		c.Err = fmt.Errorf("cluster: join config from environment: %w: %w", errs.ErrBadArgument, err)
	}
	return c
}

// launcherEnv reads the rank, the world size, the rendezvous's address
// and the run.
func launcherEnv(get func(string) string) (JoinConfig, error) {
	var c JoinConfig
	rankVar, sizeVar := "", ""
	for _, l := range launcherVars {
		if rankVar == "" && strings.TrimSpace(get(l.rank)) != "" {
			rankVar, c.Source = l.rank, l.source
		}
		if sizeVar == "" && strings.TrimSpace(get(l.size)) != "" {
			sizeVar = l.size
		}
	}
	switch {
	case rankVar == "" && sizeVar == "":
		return c, fmt.Errorf("no launcher's variables found: want %s and %s (choreorun), torchrun's RANK and WORLD_SIZE, Open MPI's or Slurm's",
			EnvRank, EnvWorldSize)
	case rankVar == "":
		return c, fmt.Errorf("%s is set but no rank variable (%s, RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID)", sizeVar, EnvRank)
	case sizeVar == "":
		return c, fmt.Errorf("%s is set but no world size variable (%s, WORLD_SIZE, OMPI_COMM_WORLD_SIZE or SLURM_NTASKS)", rankVar, EnvWorldSize)
	}
	var err error
	if c.Rank, c.Size, err = rankSize(get, rankVar, sizeVar); err != nil {
		return c, err
	}
	c.Run = runOf(get)
	if hf := strings.TrimSpace(get(EnvHostfile)); hf != "" {
		c.Hosts, err = readHosts(hf)
		return c, err
	}
	c.Coordinator, err = coordinatorOf(get, c.Source)
	return c, err
}

// coordinatorOf is rank 0's "host:port": CHOREO_COORDINATOR, else
// MASTER_ADDR:MASTER_PORT (plus one under torchrun's agent).
func coordinatorOf(get func(string) string, source string) (string, error) {
	if a := strings.TrimSpace(get(EnvCoordinator)); a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", fmt.Errorf("%s %q: want rank 0's host:port: %w", EnvCoordinator, a, err)
		}
		return a, nil
	}
	addr, port := strings.TrimSpace(get("MASTER_ADDR")), strings.TrimSpace(get("MASTER_PORT"))
	switch {
	case addr == "" && port == "":
		hint := ""
		switch source {
		case "openmpi":
			hint = " (Open MPI gives its ranks none: add -x " + EnvCoordinator + "=host:port to mpirun)"
		case "slurm":
			hint = " (Slurm gives its tasks none: export " + EnvCoordinator + "=host:port before srun)"
		}
		return "", fmt.Errorf("no coordinator: set %s to rank 0's host:port (the same for every rank), or MASTER_ADDR and MASTER_PORT%s",
			EnvCoordinator, hint)
	case addr == "":
		return "", fmt.Errorf("MASTER_PORT is set but MASTER_ADDR is not (or set %s to rank 0's host:port)", EnvCoordinator)
	case port == "":
		return "", fmt.Errorf("MASTER_ADDR is set but MASTER_PORT is not (or set %s to rank 0's host:port)", EnvCoordinator)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65534 {
		return "", fmt.Errorf("MASTER_PORT %q: want a port number", port)
	}
	if get("TORCHELASTIC_RUN_ID") != "" { // the agent's store holds MASTER_PORT
		p++
	}
	return net.JoinHostPort(addr, strconv.Itoa(p)), nil
}

// runOf names the run from the launchers' job variables (CHOREO_RUN,
// read by commonEnv, wins over them).
func runOf(get func(string) string) string {
	if r := get("TORCHELASTIC_RUN_ID"); r != "" {
		return r
	}
	for _, job := range [][]string{{"PMIX_NAMESPACE"}, {"OMPI_MCA_ess_base_jobid"}, {"SLURM_JOB_ID", "SLURM_STEP_ID"}} {
		var parts []string
		for _, v := range job {
			if s := get(v); s != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, ".")
		}
	}
	return ""
}

// commonEnv reads the variables every launcher shares.
func commonEnv(get func(string) string, c *JoinConfig) error {
	c.Secret = []byte(get(EnvSecret))
	if len(c.Secret) == 0 {
		return fmt.Errorf("%s is not set (every rank needs the same secret, at least 16 bytes)", EnvSecret)
	}
	if r := get(EnvRun); r != "" {
		c.Run = r
	}
	switch c.Transport = get(EnvTransport); {
	case c.Transport == "" || c.Transport == msg.Auto || registered(c.Transport):
	default:
		return fmt.Errorf("%s %q: want auto or one of %v", EnvTransport, c.Transport, msg.Names())
	}
	c.HostID = strings.TrimSpace(get(EnvHostID))
	var err error
	if c.Timeout, err = envDuration(get, EnvJoinTimeout, c.Timeout, "90s"); err != nil {
		return err
	}
	c.PeerTimeout, err = envDuration(get, EnvPeerTimeout, c.PeerTimeout, "10s")
	return err
}

// envDuration reads the positive duration in variable name, or keeps def
// where it is unset; example goes in the error.
func envDuration(get func(string) string, name string, def time.Duration, example string) (time.Duration, error) {
	s := strings.TrimSpace(get(name))
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return def, fmt.Errorf("%s %q: want a positive duration such as %s", name, s, example)
	}
	return d, nil
}

// rankSize reads a rank and a world size.
func rankSize(get func(string) string, rankVar, sizeVar string) (rank, size int, err error) {
	rank, err = strconv.Atoi(strings.TrimSpace(get(rankVar)))
	if err != nil {
		return 0, 0, fmt.Errorf("%s %q is not a number", rankVar, get(rankVar))
	}
	size, err = strconv.Atoi(strings.TrimSpace(get(sizeVar)))
	if err != nil {
		return 0, 0, fmt.Errorf("%s %q is not a number", sizeVar, get(sizeVar))
	}
	if size < 1 || rank < 0 || rank >= size {
		return 0, 0, fmt.Errorf("rank %d of world size %d", rank, size)
	}
	return rank, size, nil
}

// readHosts reads a hostfile: a JSON list of "host:port", given as a path
// or inline (JSON text).
func readHosts(hf string) ([]string, error) {
	b := []byte(hf)
	if !strings.HasPrefix(hf, "[") && !strings.HasPrefix(hf, "{") {
		var err error
		if b, err = os.ReadFile(hf); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvHostfile, err)
		}
	}
	var hosts []string
	if err := json.Unmarshal(b, &hosts); err != nil {
		return nil, fmt.Errorf("%s %s: want a JSON list of \"host:port\": %w", EnvHostfile, hf, err)
	}
	for i, h := range hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("%s: rank %d: %w", EnvHostfile, i, err)
		}
	}
	return hosts, nil
}
