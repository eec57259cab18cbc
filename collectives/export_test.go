package collectives

// WithProcesses marks a group as one whose ranks live in separate
// processes (as Join's groups are), for the tests of the paths that only
// such groups take, run on in-process ranks.
func WithProcesses() Option { return func(c *config) { c.processes = true } }
