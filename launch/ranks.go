package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// rankStarter makes the processes of one node's ranks: each rank's
// command, environment and output, alike for every start of the rank but
// for the restart count a replacement is given. Its log files stay open
// until close, so that a rank's replacement writes on in its rank's file.
type rankStarter struct {
	s      Spec
	common []string // every rank's environment, before its own variables
	base   int      // the node's first rank
	width  int      // digits of the highest rank, for "[rank] " tags
	term   *sink    // this process's stdout, shared by the ranks
	termE  *sink    // and its stderr
	logs   map[int]*sink
	files  []*os.File
}

func newRankStarter(s Spec, common []string, base, world int) *rankStarter {
	return &rankStarter{s: s, common: common, base: base, width: len(strconv.Itoa(world - 1)),
		term: &sink{dst: s.Stdout}, termE: &sink{dst: s.Stderr}, logs: map[int]*sink{}}
}

// member is the process of the node's local-th rank, not yet started: its
// restart-th replacement, or its first start for 0. A replacement's
// environment is its rank's first with EnvRestartCount set to restart.
func (r *rankStarter) member(local, restart int) (*member, error) {
	rank := r.base + local
	prefix := ""
	if r.s.TagOutput {
		prefix = fmt.Sprintf("[%*d] ", r.width, rank)
	}
	m := &member{id: rank, restart: restart}
	if r.s.LogDir != "" {
		k := r.logs[rank]
		if k == nil {
			f, err := os.Create(filepath.Join(r.s.LogDir, fmt.Sprintf("rank-%d.log", rank)))
			if err != nil {
				return nil, fmt.Errorf("launch: rank %d: log: %w", rank, err)
			}
			r.files = append(r.files, f)
			k = &sink{dst: f}
			r.logs[rank] = k
		}
		m.out, m.errw = newLineWriter(k, prefix), newLineWriter(k, prefix)
	} else {
		m.out, m.errw = newLineWriter(r.term, prefix), newLineWriter(r.termE, prefix)
	}
	m.cmd = exec.Command(r.s.Argv[0], r.s.Argv[1:]...)
	env := append(append([]string(nil), r.common...),
		EnvRank+"="+strconv.Itoa(rank), EnvLocalRank+"="+strconv.Itoa(local))
	if r.s.RankEnv != nil {
		env = append(env, r.s.RankEnv(rank)...)
	}
	env = append(env, r.s.Env...)
	if restart > 0 {
		env = append(env, EnvRestartCount+"="+strconv.Itoa(restart)) // the last of a name wins
	}
	m.cmd.Env = env
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.errw
	m.stop = func(sig syscall.Signal) { _ = syscall.Kill(-m.cmd.Process.Pid, sig) } // ESRCH: it has just exited
	return m, nil
}

// close closes the log files.
func (r *rankStarter) close() {
	for _, f := range r.files {
		_ = f.Close()
	}
}
