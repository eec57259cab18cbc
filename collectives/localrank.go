package collectives

import "github.com/choreo-gpu/choreo/internal/localrank"

// EnvLocalRank is the variable demo launch sets to each rank's index among
// the ranks it starts on this host.
const EnvLocalRank = localrank.Env

// LocalRank is this process's index among its job's processes on this
// host, from the first of these variables that holds a non-negative
// integer: CHOREO_LOCAL_RANK (demo launch), LOCAL_RANK (torchrun),
// OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), MPI_LOCALRANKID (MPICH) and
// SLURM_LOCALID (srun). A malformed value (not an integer, or negative) is
// ignored and the next variable tried; ok is false when none holds one.
// The CUDA backend opens GPU LocalRank modulo the GPUs it sees (see
// gpu/cuda's Driver), so ranks of one host spread over its GPUs.
func LocalRank() (rank int, ok bool) { return localrank.Get() }
