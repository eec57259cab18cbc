package collectives

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
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
	// duration such as 10s); WithPeerTimeout overrides it. Default
	// DefaultPeerTimeout.
	PeerTimeout time.Duration
	// Source names where the configuration came from: "choreo",
	// "torchrun", "openmpi", "slurm" or "" when built by hand.
	Source string
	// Err is what FromEnv could not read; Join reports it.
	Err error
}

// DefaultJoinTimeout is JoinConfig.Timeout's default.
const DefaultJoinTimeout = 60 * time.Second

// DefaultPeerTimeout is the peer timeout when neither WithPeerTimeout nor
// JoinConfig.PeerTimeout sets one.
const DefaultPeerTimeout = actors.DefaultPeerTimeout

// Environment variables read by FromEnv.
const (
	EnvRank        = "CHOREO_RANK"
	EnvWorldSize   = "CHOREO_WORLD_SIZE"
	EnvHostfile    = "CHOREO_HOSTFILE"
	EnvCoordinator = "CHOREO_COORDINATOR"
	EnvSecret      = "CHOREO_SECRET"
	EnvRun         = "CHOREO_RUN"
	EnvJoinTimeout = "CHOREO_JOIN_TIMEOUT"
	EnvTransport   = "CHOREO_TRANSPORT"
	EnvPeerTimeout = "CHOREO_PEER_TIMEOUT"
	EnvHostID      = "CHOREO_HOST_ID"
)

// FromEnv reads this process's JoinConfig from the environment, trying
// each launcher's variables in turn:
//   - choreo's (demo launch): CHOREO_RANK, CHOREO_WORLD_SIZE and
//     CHOREO_HOSTFILE, the path of a JSON list of "host:port" indexed by
//     rank (or the list itself), or CHOREO_COORDINATOR;
//   - torchrun's: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (rank 0 hosts
//     the rendezvous at MASTER_PORT+1 under torchrun's agent, whose own
//     store holds MASTER_PORT; at MASTER_PORT otherwise);
//   - Open MPI's: OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE;
//   - Slurm's: SLURM_PROCID and SLURM_NTASKS.
//
// Under Open MPI and Slurm the rendezvous is at CHOREO_COORDINATOR, or
// MASTER_ADDR:MASTER_PORT, or else, when every rank runs on this host, at
// 127.0.0.1 on a port derived from the job id. CHOREO_SECRET is always
// needed (pass it on: `mpirun -x CHOREO_SECRET`); CHOREO_RUN,
// CHOREO_JOIN_TIMEOUT, CHOREO_TRANSPORT, CHOREO_PEER_TIMEOUT and
// CHOREO_HOST_ID are optional. What cannot be read is left in Err, naming the variable.
func FromEnv() JoinConfig { return fromEnv(os.Getenv) }

// fromEnv is FromEnv over any lookup.
func fromEnv(get func(string) string) JoinConfig {
	var c JoinConfig
	var err error
	switch {
	case get(EnvRank) != "" || get(EnvWorldSize) != "":
		c, err = choreoEnv(get)
	case get("RANK") != "" && get("WORLD_SIZE") != "":
		c, err = torchrunEnv(get)
	case get("OMPI_COMM_WORLD_RANK") != "":
		c, err = jobEnv(get, "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
			"OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid")
	case get("SLURM_PROCID") != "":
		c, err = jobEnv(get, "slurm", "SLURM_PROCID", "SLURM_NTASKS",
			"SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID")
	default:
		err = fmt.Errorf("no launcher's variables found (want %s and %s, torchrun's RANK and WORLD_SIZE, Open MPI's or Slurm's)",
			EnvRank, EnvWorldSize)
	}
	if err == nil {
		err = commonEnv(get, &c)
	}
	if err != nil {
		c.Err = fmt.Errorf("collectives: join config from environment: %w: %w", ErrBadArgument, err)
	}
	return c
}

// choreoEnv reads demo launch's variables.
func choreoEnv(get func(string) string) (JoinConfig, error) {
	c := JoinConfig{Source: "choreo"}
	var err error
	if c.Rank, c.Size, err = rankSize(get, EnvRank, EnvWorldSize); err != nil {
		return c, err
	}
	switch hf := strings.TrimSpace(get(EnvHostfile)); {
	case hf != "":
		c.Hosts, err = readHosts(hf)
	case get(EnvCoordinator) != "":
		c.Coordinator = get(EnvCoordinator)
	default:
		err = fmt.Errorf("neither %s nor %s is set", EnvHostfile, EnvCoordinator)
	}
	return c, err
}

// torchrunEnv reads torchrun's variables.
func torchrunEnv(get func(string) string) (JoinConfig, error) {
	c := JoinConfig{Source: "torchrun", Run: get("TORCHELASTIC_RUN_ID")}
	var err error
	if c.Rank, c.Size, err = rankSize(get, "RANK", "WORLD_SIZE"); err != nil {
		return c, err
	}
	if c.Coordinator = get(EnvCoordinator); c.Coordinator != "" {
		return c, nil
	}
	addr, port := get("MASTER_ADDR"), get("MASTER_PORT")
	if addr == "" || port == "" {
		return c, fmt.Errorf("torchrun: MASTER_ADDR and MASTER_PORT must be set")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65534 {
		return c, fmt.Errorf("torchrun: MASTER_PORT %q", port)
	}
	if get("TORCHELASTIC_RUN_ID") != "" { // the agent's store holds MASTER_PORT
		p++
	}
	c.Coordinator = net.JoinHostPort(addr, strconv.Itoa(p))
	return c, nil
}

// jobEnv reads a job launcher's (Open MPI's, Slurm's) rank variables; the
// rendezvous address comes from CHOREO_COORDINATOR or MASTER_ADDR and
// MASTER_PORT, or, when all ranks are on this host, from the job's ids.
func jobEnv(get func(string) string, source, rankVar, sizeVar, localSizeVar string, jobVars ...string) (JoinConfig, error) {
	c := JoinConfig{Source: source}
	var err error
	if c.Rank, c.Size, err = rankSize(get, rankVar, sizeVar); err != nil {
		return c, err
	}
	var job []string
	for _, v := range jobVars {
		if s := get(v); s != "" {
			job = append(job, s)
		}
	}
	c.Run = strings.Join(job, ".")
	switch {
	case get(EnvCoordinator) != "":
		c.Coordinator = get(EnvCoordinator)
	case get("MASTER_ADDR") != "" && get("MASTER_PORT") != "":
		c.Coordinator = net.JoinHostPort(get("MASTER_ADDR"), get("MASTER_PORT"))
	case get(localSizeVar) == strconv.Itoa(c.Size) && c.Run != "":
		c.Coordinator = net.JoinHostPort("127.0.0.1", strconv.Itoa(jobPort(c.Run)))
	default:
		err = fmt.Errorf("%s: set %s (rank 0's host:port) for ranks on several hosts", source, EnvCoordinator)
	}
	return c, err
}

// jobPort maps a job id to a port in [29600, 39600), so that the ranks of
// one job agree on it without talking.
func jobPort(job string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(job))
	return 29600 + int(h.Sum32()%10000)
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
