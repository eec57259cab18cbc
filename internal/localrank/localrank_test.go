package localrank

import "testing"

func lookup(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestLookupOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		rank int
		from string
		ok   bool
	}{
		{"none", nil, 0, "", false},
		{"choreo", map[string]string{Env: "3"}, 3, Env, true},
		{"torchrun", map[string]string{"LOCAL_RANK": "2"}, 2, "LOCAL_RANK", true},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "1"}, 1, "OMPI_COMM_WORLD_LOCAL_RANK", true},
		{"mpich", map[string]string{"MPI_LOCALRANKID": "4"}, 4, "MPI_LOCALRANKID", true},
		{"slurm", map[string]string{"SLURM_LOCALID": "5"}, 5, "SLURM_LOCALID", true},
		{"zero", map[string]string{"SLURM_LOCALID": "0"}, 0, "SLURM_LOCALID", true},
		{"spaces", map[string]string{"LOCAL_RANK": " 7\n"}, 7, "LOCAL_RANK", true},
		{"choreo first", map[string]string{Env: "1", "LOCAL_RANK": "2", "SLURM_LOCALID": "3"}, 1, Env, true},
		{"torchrun before mpi", map[string]string{"LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "3", "MPI_LOCALRANKID": "4"}, 2, "LOCAL_RANK", true},
		{"malformed skipped", map[string]string{Env: "x", "LOCAL_RANK": "-1", "OMPI_COMM_WORLD_LOCAL_RANK": "1.5", "MPI_LOCALRANKID": "6"}, 6, "MPI_LOCALRANKID", true},
		{"empty skipped", map[string]string{Env: "", "LOCAL_RANK": "  ", "SLURM_LOCALID": "2"}, 2, "SLURM_LOCALID", true},
		{"all malformed", map[string]string{Env: "one", "SLURM_LOCALID": "99999999999999999999"}, 0, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rank, from, ok := Lookup(lookup(c.env))
			if rank != c.rank || from != c.from || ok != c.ok {
				t.Errorf("Lookup = %d, %q, %v; want %d, %q, %v", rank, from, ok, c.rank, c.from, c.ok)
			}
		})
	}
}

func TestGetReadsTheEnvironment(t *testing.T) {
	for _, v := range Vars() {
		t.Setenv(v, "")
	}
	if r, ok := Get(); ok {
		t.Fatalf("Get = %d, true with no variable set", r)
	}
	t.Setenv("SLURM_LOCALID", "3")
	t.Setenv("LOCAL_RANK", "bad")
	if r, ok := Get(); !ok || r != 3 {
		t.Errorf("Get = %d, %v; want 3, true", r, ok)
	}
	t.Setenv(Env, "1")
	if r, ok := Get(); !ok || r != 1 {
		t.Errorf("Get = %d, %v; want 1, true", r, ok)
	}
}
