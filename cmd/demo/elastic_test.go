package main

import (
	"strings"
	"testing"
	"time"
)

// run --elastic and its flags parse, reach the ranks' command line
// unchanged (run and node run take the same), and settings that cannot
// run are refused before anything starts.
func TestElasticFlags(t *testing.T) {
	c, cmd, _, ok, _, se := parse("run", "--elastic", "--steps", "8", "--duration", "2s", "--kill-rank", "1", "--kill-at", "3", "--size", "64MiB")
	if !ok || cmd != "run" || !c.Run.Elastic || c.Run.Duration != 2*time.Second || c.Run.KillRank != 1 || c.Run.KillAt != 3 || c.Run.Size != 64<<20 {
		t.Fatalf("run --elastic ...: ok %v, command %q, %+v, stderr %q", ok, cmd, c.Run.elasticFlags, se)
	}
	args := append([]string{"node", "run"}, c.Run.args()...)
	var help strings.Builder
	if _, err := checkArgs(args, &help); err != nil {
		t.Errorf("the ranks' command line %q refused: %v", args, err)
	}
	n, _, _, ok, _, _ := parse(args...)
	if !ok || n.Node.Run.elasticFlags != c.Run.elasticFlags || n.Node.Run.Steps != 8 {
		t.Errorf("node run got %+v, want %+v", n.Node.Run.elasticFlags, c.Run.elasticFlags)
	}
	if d, _, _, _, _, _ := parse("run"); d.Run.args() == nil || strings.Contains(strings.Join(d.Run.args(), " "), "elastic") {
		t.Errorf("run without --elastic passes %q", d.Run.args())
	}
	if d, _, _, _, _, _ := parse("run"); d.Run.KillAt != -1 || d.Run.killAt() != 25 {
		t.Errorf("--kill-at by default: %d, half of the 50 steps %d", d.Run.KillAt, d.Run.killAt())
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--kill-rank", "1"}, "go with --elastic"},
		{[]string{"--elastic", "--kill-at", "2"}, "needs --kill-rank"},
		{[]string{"--elastic", "--steps", "4", "--kill-rank", "0", "--kill-at", "4"}, "the soak has 4 steps"},
		{[]string{"--elastic", "--duration=-1s"}, "--duration"},
	} {
		c, _, _, ok, _, se := parse(append([]string{"run"}, bad.args...)...)
		if !ok {
			t.Errorf("%q: not parsed: %s", bad.args, se)
			continue
		}
		if _, _, err := c.Run.shape(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error mentioning %q", bad.args, err, bad.want)
		}
	}
	if err := (&runCmd{Inproc: true, runFlags: runFlags{Steps: 1, Size: 4, DType: "float32", elasticFlags: elasticFlags{Elastic: true, KillRank: -1, KillAt: -1}}}).Run(&globals{}); err == nil ||
		!strings.Contains(err.Error(), "--inproc") {
		t.Errorf("--elastic --inproc: %v", err)
	}
	for _, c := range []struct {
		args []string
		want bool
	}{{[]string{"run", "--elastic"}, true}, {[]string{"run", "--steps", "3"}, false}, {[]string{"run", "--", "--elastic"}, false}} {
		if got := elasticArgs(c.args); got != c.want {
			t.Errorf("elasticArgs(%q) = %v", c.args, got)
		}
	}
}
