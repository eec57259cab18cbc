// Package localrank finds this process's local rank: its index among the
// processes of its job on this host, as its launcher numbered them. The
// CUDA backend picks its GPU by it and collectives.LocalRank reports it; it
// lives here, on the standard library alone, so that both can import it.
package localrank

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// Env is the variable that demo launch sets for each rank it starts
// (0 to n-1) and that overrides every launcher's own.
const Env = "CHOREO_LOCAL_RANK"

// Vars are the variables Get reads, in order: choreo's, torchrun's,
// Open MPI's, MPICH's (Hydra) and Slurm's (srun).
func Vars() []string { return slices.Clone(vars) }

var vars = []string{
	Env,
	"LOCAL_RANK",                 // torchrun
	"OMPI_COMM_WORLD_LOCAL_RANK", // Open MPI's mpirun
	"MPI_LOCALRANKID",            // MPICH's mpiexec (Hydra)
	"SLURM_LOCALID",              // srun
}

// Get is this process's local rank from the environment: the first of
// Vars that holds a non-negative integer (spaces around it allowed). An
// unset or empty variable is skipped, and so is a malformed one (not an
// integer, or negative): the next is tried. ok is false when none holds a
// local rank.
func Get() (rank int, ok bool) {
	rank, _, ok = Lookup(os.Getenv)
	return rank, ok
}

// Lookup is Get over any lookup; it also returns the variable the rank
// came from.
func Lookup(get func(string) string) (rank int, from string, ok bool) {
	for _, v := range vars {
		if r, ok := parse(get(v)); ok {
			return r, v, true
		}
	}
	return 0, "", false
}

// parse reads a local rank: a non-negative decimal integer.
func parse(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return 0, false
	}
	return r, true
}
