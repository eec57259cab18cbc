package collectives

import "testing"

func TestLocalRankFromEnv(t *testing.T) {
	for _, v := range []string{EnvLocalRank, "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"} {
		t.Setenv(v, "")
	}
	if r, ok := LocalRank(); ok {
		t.Fatalf("LocalRank = %d, true with no variable set", r)
	}
	for _, c := range []struct {
		name, value string
		want        int
	}{
		{"OMPI_COMM_WORLD_LOCAL_RANK", "2", 2}, // Open MPI
		{"LOCAL_RANK", "nope", 2},              // malformed: Open MPI's still
		{"LOCAL_RANK", "1", 1},                 // torchrun before Open MPI
		{EnvLocalRank, "-3", 1},                // malformed: torchrun's still
		{EnvLocalRank, "0", 0},                 // demo launch's before all
	} {
		t.Setenv(c.name, c.value)
		if r, ok := LocalRank(); !ok || r != c.want {
			t.Errorf("after %s=%q: LocalRank = %d, %v; want %d, true", c.name, c.value, r, ok, c.want)
		}
	}
}
