package metal

import (
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

func TestParseFenceMode(t *testing.T) {
	for in, want := range map[string]FenceMode{
		"": FenceEvent, "event": FenceEvent, "slow": FenceEvent,
		"shared": FenceShared, "FAST": FenceShared, " shared ": FenceShared,
	} {
		got, err := ParseFenceMode(in)
		if err != nil || got != want {
			t.Errorf("ParseFenceMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseFenceMode("spin"); !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("ParseFenceMode(spin) error %v, want ErrBadArgument", err)
	}
	if FenceShared.String() != "shared" || FenceEvent.String() != "event" {
		t.Errorf("mode names %q %q", FenceShared, FenceEvent)
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	opts, err := optionsFromEnv(env(map[string]string{FenceEnv: "fast", WaitPollsEnv: "1000"}))
	if err != nil {
		t.Fatal(err)
	}
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	if c.fence != FenceShared || c.waitPolls != 1000 {
		t.Errorf("config from env = %+v, want shared, 1000 polls", c)
	}
	if opts, err := optionsFromEnv(env(nil)); err != nil || len(opts) != 0 {
		t.Errorf("empty env: %d options, %v", len(opts), err)
	}
	for _, bad := range []map[string]string{
		{FenceEnv: "spin"}, {WaitPollsEnv: "0"}, {WaitPollsEnv: "-3"}, {WaitPollsEnv: "many"},
	} {
		if _, err := optionsFromEnv(env(bad)); !errors.Is(err, gpu.ErrBadArgument) {
			t.Errorf("env %v: error %v, want ErrBadArgument", bad, err)
		}
	}
	c = defaultConfig()
	WithWaitPolls(0)(&c)
	if c.waitPolls != 1 {
		t.Errorf("WithWaitPolls(0) gives %d polls, want 1", c.waitPolls)
	}
}
