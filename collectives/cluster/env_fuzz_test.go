package cluster

import "testing"

// FuzzFromEnv: whatever a launcher's variables hold, FromEnv ends in a
// configuration Join can use (a rank within the world, hosts for every
// rank or a coordinator, a secret) or an error, never a panic.
func FuzzFromEnv(f *testing.F) {
	f.Add("1", "2", `["a:1","b:2"]`, "", "0123456789abcdef", "5s", "", "")
	f.Add("", "", "", "", "0123456789abcdef", "", "3", "4")
	f.Add("0", "1", `[`, "h:1", "", "-1s", "x", "")
	f.Fuzz(func(t *testing.T, rank, size, hosts, coord, secret, timeout, ompiRank, ompiSize string) {
		e := env{EnvRank: rank, EnvWorldSize: size, EnvHostfile: hosts, EnvCoordinator: coord,
			EnvSecret: secret, EnvJoinTimeout: timeout, "OMPI_COMM_WORLD_RANK": ompiRank,
			"OMPI_COMM_WORLD_SIZE": ompiSize, "OMPI_COMM_WORLD_LOCAL_SIZE": ompiSize, "PMIX_NAMESPACE": "job"}
		if len(hosts) > 0 && hosts[0] != '[' && hosts[0] != '{' {
			return // a path: not the fuzzer's to read files
		}
		c := fromEnv(e.get)
		if c.Err != nil {
			return
		}
		if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size || len(c.Secret) == 0 ||
			(len(c.Hosts) == 0 && c.Coordinator == "") || c.Timeout < 0 {
			t.Fatalf("accepted %+v", c)
		}
	})
}
