package cluster

import (
	"errors"
	"github.com/choreo-gpu/choreo/internal/errs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// env is a fake environment for fromEnv.
type env map[string]string

func (e env) get(k string) string { return e[k] }

const secret16 = "0123456789abcdef"

func TestFromEnvLaunchers(t *testing.T) {
	hostfile := filepath.Join(t.TempDir(), "hosts.json")
	if err := os.WriteFile(hostfile, []byte(`["127.0.0.1:7001","127.0.0.1:7002"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  env
		want JoinConfig
	}{
		{"choreo hostfile", env{EnvRank: "1", EnvWorldSize: "2", EnvHostfile: hostfile, EnvSecret: secret16, EnvRun: "r1"},
			JoinConfig{Rank: 1, Size: 2, Hosts: []string{"127.0.0.1:7001", "127.0.0.1:7002"}, Run: "r1", Source: "choreo"}},
		{"choreo inline hosts", env{EnvRank: "0", EnvWorldSize: "1", EnvHostfile: `["h:1"]`, EnvSecret: secret16, EnvJoinTimeout: "5s"},
			JoinConfig{Rank: 0, Size: 1, Hosts: []string{"h:1"}, Source: "choreo", Timeout: 5 * time.Second}},
		{"choreo coordinator", env{EnvRank: "3", EnvWorldSize: "4", EnvCoordinator: "10.0.0.1:9000", EnvSecret: secret16},
			JoinConfig{Rank: 3, Size: 4, Coordinator: "10.0.0.1:9000", Source: "choreo"}},
		{"torchrun agent", env{"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
			"TORCHELASTIC_RUN_ID": "job7", EnvSecret: secret16},
			JoinConfig{Rank: 2, Size: 4, Coordinator: "10.0.0.1:29501", Run: "job7", Source: "torchrun"}},
		{"torchrun plain", env{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "::1", "MASTER_PORT": "29500", EnvSecret: secret16},
			JoinConfig{Rank: 0, Size: 2, Coordinator: "[::1]:29500", Source: "torchrun"}},
		{"openmpi", env{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
			"PMIX_NAMESPACE": "prterun-x-123@1", EnvCoordinator: "127.0.0.1:7000", EnvSecret: secret16},
			JoinConfig{Rank: 1, Size: 4, Coordinator: "127.0.0.1:7000", Run: "prterun-x-123@1", Source: "openmpi"}},
		{"openmpi with master", env{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "7000",
			EnvSecret: secret16},
			JoinConfig{Rank: 0, Size: 2, Coordinator: "h:7000", Source: "openmpi"}},
		{"choreo wins over torchrun", env{EnvRank: "1", "RANK": "3", "WORLD_SIZE": "4", EnvCoordinator: "c:1",
			"MASTER_ADDR": "m", "MASTER_PORT": "2", EnvSecret: secret16},
			JoinConfig{Rank: 1, Size: 4, Coordinator: "c:1", Source: "choreo"}},
		{"choreo's world size wins over slurm's", env{"SLURM_PROCID": "2", "SLURM_NTASKS": "8", EnvWorldSize: "3",
			"SLURM_JOB_ID": "9", EnvRun: "mine", EnvCoordinator: "c:1", EnvSecret: secret16},
			JoinConfig{Rank: 2, Size: 3, Coordinator: "c:1", Run: "mine", Source: "slurm"}},
		{"slurm with master", env{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "42", "MASTER_ADDR": "n1", "MASTER_PORT": "7000", EnvSecret: secret16},
			JoinConfig{Rank: 5, Size: 8, Coordinator: "n1:7000", Run: "42", Source: "slurm"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fromEnv(c.env.get)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if string(got.Secret) != secret16 {
				t.Fatalf("secret %q", got.Secret)
			}
			got.Secret = nil
			if !sameJoin(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func sameJoin(a, b JoinConfig) bool {
	return a.Rank == b.Rank && a.Size == b.Size && strings.Join(a.Hosts, ",") == strings.Join(b.Hosts, ",") &&
		a.Coordinator == b.Coordinator && a.Run == b.Run && a.Source == b.Source && a.Timeout == b.Timeout
}

// TestFromEnvErrors: what cannot be read is reported, as ErrBadArgument,
// naming the variable.
func TestFromEnvErrors(t *testing.T) {
	cases := []struct {
		env  env
		want string
	}{
		{env{}, "no launcher's variables"},
		{env{EnvRank: "x", EnvWorldSize: "2", EnvHostfile: `["a:1","b:2"]`, EnvSecret: secret16}, "CHOREO_RANK"},
		{env{EnvRank: "2", EnvWorldSize: "2", EnvHostfile: `["a:1","b:2"]`, EnvSecret: secret16}, "rank 2 of world size 2"},
		{env{EnvRank: "0", EnvWorldSize: "2", EnvSecret: secret16}, "no coordinator: set CHOREO_COORDINATOR"},
		{env{EnvRank: "0", "SLURM_NTASKS": "2", EnvCoordinator: "nohostport", EnvSecret: secret16}, "CHOREO_COORDINATOR \"nohostport\""},
		{env{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", EnvSecret: secret16}, "export CHOREO_COORDINATOR"},
		{env{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", EnvSecret: secret16}, "MASTER_PORT is not"},
		{env{"WORLD_SIZE": "2", EnvSecret: secret16}, "no rank variable"},
		{env{EnvRank: "0", EnvWorldSize: "2", EnvHostfile: "/nonexistent/hosts.json", EnvSecret: secret16}, "no such file"},
		{env{EnvRank: "0", EnvWorldSize: "2", EnvHostfile: `["a"]`, EnvSecret: secret16}, "missing port"},
		{env{EnvRank: "0", EnvWorldSize: "2", EnvHostfile: `{"a":1}`, EnvSecret: secret16}, "JSON list"},
		{env{EnvRank: "0", EnvWorldSize: "2", EnvHostfile: `["a:1","b:2"]`}, "CHOREO_SECRET is not set"},
		{env{EnvRank: "0", EnvWorldSize: "2", EnvHostfile: `["a:1","b:2"]`, EnvSecret: secret16, EnvJoinTimeout: "soon"}, "CHOREO_JOIN_TIMEOUT"},
		{env{"RANK": "0", "WORLD_SIZE": "2", EnvSecret: secret16}, "MASTER_ADDR"},
		{env{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", EnvSecret: secret16}, "-x CHOREO_COORDINATOR"},
	}
	for _, c := range cases {
		got := fromEnv(c.env.get)
		if got.Err == nil || !errors.Is(got.Err, errs.ErrBadArgument) || !strings.Contains(got.Err.Error(), c.want) {
			t.Errorf("%v: got %v, want ErrBadArgument mentioning %q", c.env, got.Err, c.want)
		}
	}
}
