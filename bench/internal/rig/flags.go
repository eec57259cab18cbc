package rig

import (
	"flag"
	"strings"
)

// Flags is the command line every harness shares, as given: -only (the
// experiments to run, comma-separated, still to be checked with Names),
// -demo, -logs and -seed.
type Flags struct {
	Only string
	Demo string
	Logs string
	Seed uint64
}

// NewFlagSet is a flag set named name that returns its errors, with the
// shared flags registered: -only defaults to every one of experiments, and
// its help ends with onlyMore; -logs keeps the output of logsWhat; -seed
// seeds seedWhat.
func NewFlagSet(name string, experiments []string, onlyMore, logsWhat, seedWhat string) (*flag.FlagSet, *Flags) {
	f := &Flags{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.Only, "only", strings.Join(experiments, ","), "experiments to run, comma-separated: "+strings.Join(experiments, ", ")+onlyMore)
	fs.StringVar(&f.Demo, "demo", "", "a demo executable to use instead of building ./cmd/demo")
	fs.StringVar(&f.Logs, "logs", "", "directory for the output of "+logsWhat+" (default: a new one under the temporary directory)")
	fs.Uint64Var(&f.Seed, "seed", 0, "seed of "+seedWhat+"; 0: from the clock")
	return fs, f
}
