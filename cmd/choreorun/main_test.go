package main

import (
	"slices"
	"strings"
	"testing"
)

// mpirun's -np becomes --np among choreorun's flags, and nowhere else.
func TestMpirunFlags(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"-np", "4", "./prog", "-np", "2"}, []string{"--np", "4", "./prog", "-np", "2"}},
		{[]string{"-np=4", "prog"}, []string{"--np=4", "prog"}},
		{[]string{"-x", "-np", "-np", "2", "prog"}, []string{"-x", "-np", "--np", "2", "prog"}},
		{[]string{"-n", "2", "--", "-np"}, []string{"-n", "2", "--", "-np"}},
	} {
		if got := mpirunFlags(c.in); !slices.Equal(got, c.want) {
			t.Errorf("mpirunFlags(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The command line's forms: -n, -np, --nproc-per-node with --nnodes, the
// program after "--", and refusals in one line with exit status 2.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		args      []string
		perNode   int
		argv      string
		errSubstr string
	}{
		{[]string{"-n", "4", "./prog", "--flag"}, 4, "./prog --flag", ""},
		{[]string{"-np", "4", "--", "go", "run", "./x"}, 4, "go run ./x", ""},
		{[]string{"--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "1", "--coordinator", "h:1", "p"}, 2, "p", ""},
		{[]string{"-n", "8", "--hosts", "a,b", "p"}, 4, "p", ""},
		{[]string{"-n", "3", "--hosts", "a,b", "p"}, 0, "", "does not divide"},
		{[]string{"-n", "4", "--nproc-per-node", "3", "p"}, 0, "", "is not --nproc-per-node"},
		{[]string{"-n", "2", "-x", "CHOREORUN_TEST_UNSET_VAR", "p"}, 0, "", "is not set here"},
		{[]string{"-n", "2", "--env", "NOEQ", "p"}, 0, "", "KEY=VALUE"},
		{[]string{"p"}, 0, "", "how many ranks"},
		{[]string{"-n", "2", "--max-restarts", "3", "p"}, 2, "p", ""},
		{[]string{"-n", "2", "--max-restarts", "1", "--elastic", "p"}, 2, "p", ""},
		{[]string{"-n", "2", "--max-restarts=-1", "p"}, 0, "", "want 0 or more"},
		{[]string{"-n", "4", "--max-restarts", "1", "--hosts", "a,b", "p"}, 0, "", "several hosts"},
	} {
		var out, errw strings.Builder
		if c.errSubstr != "" {
			code := run(c.args, strings.NewReader(""), &out, &errw)
			lines := strings.Split(strings.TrimRight(errw.String(), "\n"), "\n")
			if code != 2 || len(lines) != 2 || !strings.Contains(lines[0], c.errSubstr) {
				t.Errorf("%q: exit %d, stderr %q; want 2 and one line mentioning %q", c.args, code, errw.String(), c.errSubstr)
			}
			continue
		}
		s, err := parse(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if s.NProcPerNode != c.perNode || strings.Join(s.Argv, " ") != c.argv {
			t.Errorf("%q: %d per node, argv %q; want %d, %q", c.args, s.NProcPerNode, s.Argv, c.perNode, c.argv)
		}
	}
}
