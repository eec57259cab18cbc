package rig

import (
	"slices"
	"strings"
	"testing"
)

func TestWorldEnv(t *testing.T) {
	env := WorldEnv(4, "/tmp/hosts.json", "run-1", "")
	for _, want := range []string{"CHOREO_WORLD_SIZE=4", "CHOREO_HOSTFILE=/tmp/hosts.json", "CHOREO_RUN=run-1"} {
		if !slices.Contains(env, want) {
			t.Errorf("%q missing from %q", want, env)
		}
	}
	if slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "CHOREO_TRANSPORT=") }) {
		t.Errorf("an empty transport set CHOREO_TRANSPORT: %q", env)
	}
	secret := func(env []string) string {
		i := slices.IndexFunc(env, func(s string) bool { return strings.HasPrefix(s, "CHOREO_SECRET=") })
		if i < 0 {
			t.Fatalf("no CHOREO_SECRET in %q", env)
		}
		return env[i]
	}
	other := WorldEnv(4, "h", "r", "tcp")
	if secret(env) == secret(other) || len(secret(env)) != len("CHOREO_SECRET=")+64 {
		t.Errorf("secrets %q and %q: want two different 32-byte ones", secret(env), secret(other))
	}
	if !slices.Contains(other, "CHOREO_TRANSPORT=tcp") {
		t.Errorf("CHOREO_TRANSPORT=tcp missing from %q", other)
	}
}
