package rig

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"strconv"
)

// WorldEnv is the environment every rank of a world of n shares, as
// `demo launch` sets it: the world size, the hostfile (a path, or the JSON
// list itself), a fresh secret, the run's name, the transport ("" leaves
// CHOREO_TRANSPORT unset) and, unless the harness's own environment sets
// it, GOMAXPROCS sharing this machine's processors out among the n ranks.
// Each rank adds its CHOREO_RANK and CHOREO_LOCAL_RANK.
func WorldEnv(n int, hostfile, run, transport string) []string {
	env := []string{
		"CHOREO_WORLD_SIZE=" + strconv.Itoa(n),
		"CHOREO_HOSTFILE=" + hostfile,
		"CHOREO_SECRET=" + RandomHex(32),
		"CHOREO_RUN=" + run,
	}
	if transport != "" {
		env = append(env, "CHOREO_TRANSPORT="+transport)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(max(1, runtime.NumCPU()/n)))
	}
	return env
}

// RandomHex is n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
