// Command choreorun starts the ranks of a program that joins a choreo
// group (cluster.Join with cluster.FromEnv), in the conventions of
// torchrun, mpirun and mlx.launch, and watches them to the end.
//
//	choreorun -n 4 ./prog args...              # 4 ranks on this host
//	choreorun -np 4 -- go run ./cmd/x --flag   # the same ('--' ends choreorun's flags)
//	choreorun -n 8 --hosts a,b ./prog          # 4 ranks on each of a and b, over ssh
//	choreorun -n 8 --hostfile hosts.txt ./prog # one host a line ('#' starts a comment)
//
//	# one choreorun per host, as with torchrun (the same secret on each):
//	export CHOREO_SECRET=$(openssl rand -hex 32)
//	choreorun --nnodes 2 --node-rank 0 --nproc-per-node 4 --coordinator a:29500 ./prog   # on a
//	choreorun --nnodes 2 --node-rank 1 --nproc-per-node 4 --coordinator a:29500 ./prog   # on b
//
// -n (or -np, --np) is the number of ranks in all, --nproc-per-node the
// number on each host; give either. Each rank gets CHOREO_RANK,
// CHOREO_LOCAL_RANK, CHOREO_WORLD_SIZE, CHOREO_COORDINATOR, CHOREO_SECRET
// (made for this launch unless CHOREO_SECRET is set; it is passed through
// the environment only, never a command line) and CHOREO_RUN, as package
// launch describes. -x VAR passes this environment's VAR on (-x VAR=VALUE
// sets it), as does --env KEY=VALUE; over ssh these travel on ssh's
// standard input, with the secret.
//
// --hosts and --hostfile run node i on host i with `ssh HOST choreorun
// --agent ...` (--ssh sets the command, such as "ssh -p 2222"; --remote the
// choreorun path on those hosts, by default this one's): choreorun must be
// installed there, and the program found, at the same paths.
//
// Output comes back line by line, led by "[rank] " with --tag-output, or
// into LOG_DIR/rank-<rank>.log with --log-dir. A rank that fails stops
// the others (SIGTERM, SIGKILL after --grace) and choreorun exits 1 with
// one line naming it, how it ended and its last line of output; Ctrl-C
// stops every rank (exit 130). A command line choreorun cannot parse
// exits 2 with one line and a hint.
//
// With --elastic, a rank that has joined its group (cluster.Join tells
// the launcher through launch.Joined) and then dies or exits unsuccessfully
// does not end the launch: choreorun prints one line for it ("choreorun:
// lost rank 2: killed by SIGKILL after 3.1s; 3 ranks go on") and lets the
// others go on (they shrink their group, collectives.Group.Shrink). It
// ends when every rank has exited, with status 0 when at least one rank
// exited 0 and every rank still running when the first did so exited 0
// too. A rank that fails before it joined stops the launch as without
// --elastic.
//
// With --max-restarts N (one host), a launch may start ranks again, up to
// N times in all. Without --elastic, a launch that fails starts every rank
// again, as torchrun's does: a line says so ("choreorun: restart 1 of 3,
// every rank: rank 2 exited 1 ..."), each start has a run of its own, and
// its ranks find the count in CHOREO_RESTART_COUNT (0 the first time) to
// resume from their own checkpoints. Ctrl-C and --deadline (counted from
// the first start) end the launch for good.
//
// With --elastic --max-restarts N, a lost rank alone starts again, at
// once, with its rank's environment and CHOREO_RESTART_COUNT the number
// of times that rank has been started again (1 the first time): it
// rejoins the group the others run on when they grow it
// (collectives.Group.Grow). A line follows the loss's ("choreorun:
// restarting rank 2 (restart 1 of 3; CHOREO_RESTART_COUNT=1)"). A
// restarted rank lost again, before it rejoined or after, is lost as any
// and may be restarted while restarts remain. Rank 0 is not restarted,
// nor any rank once rank 0 is lost, since rank 0 hosts the group's
// rendezvous; nor is any once the launch is ending (Ctrl-C, --deadline, a
// failure, a rank that exited 0, no other rank running). A loss that is
// not restarted says why on a line of its own ("choreorun: rank 0 is not
// restarted: rank 0 hosts the group's rendezvous, ...").
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/choreo-gpu/choreo/launch"
)

// cli is choreorun's command line.
type cli struct {
	N            int           `short:"n" name:"np" help:"Ranks in all (-n, -np and --np alike)."`
	NProcPerNode int           `name:"nproc-per-node" help:"Ranks on each host."`
	NNodes       int           `name:"nnodes" help:"Hosts (one choreorun each unless --hosts); default 1."`
	NodeRank     int           `name:"node-rank" help:"This host's index, 0 to nnodes-1."`
	Coordinator  string        `help:"Rank 0's host:port, the same on every host (with several hosts); default on one host: 127.0.0.1 and a free port."`
	Hosts        []string      `help:"Hosts to start the ranks on over ssh, one node each (comma-separated)."`
	Hostfile     string        `type:"existingfile" help:"A file of hosts, one a line, as for --hosts."`
	SSH          string        `name:"ssh" default:"ssh -o BatchMode=yes" help:"The command that runs a command line on a host (given the host, then the line)."`
	Remote       string        `help:"The choreorun command on the other hosts; default this one's path."`
	Export       []string      `short:"x" name:"export" sep:"none" help:"Pass this environment's VAR on to every rank (VAR=VALUE sets it)."`
	Env          []string      `sep:"none" help:"Set KEY=VALUE for every rank."`
	TagOutput    bool          `name:"tag-output" help:"Lead each output line with \"[rank] \"."`
	LogDir       string        `name:"log-dir" help:"Write each rank's output to LOG_DIR/rank-<rank>.log instead."`
	Grace        time.Duration `default:"3s" help:"How long a rank asked to stop may take before it is killed."`
	Deadline     time.Duration `help:"Stop every rank after this long; 0: no limit."`
	Elastic      bool          `help:"Go on when a rank that has joined its group dies or fails (the others shrink their group): print a line for it and end when every rank has exited (not with --hosts)."`
	MaxRestarts  int           `name:"max-restarts" help:"Start every rank again when one fails, up to this many times (CHOREO_RESTART_COUNT tells each start's ranks the count); with --elastic, start a lost rank alone again instead (this many restarts in all; its CHOREO_RESTART_COUNT counts its own). One host."`
	Agent        bool          `hidden:"" help:"Run as a node started over ssh: the launch's variables on standard input."`
	PeerLostExit int           `name:"peer-lost-exit" hidden:"" help:"The exit status of a rank that only lost a peer."`
	Command      []string      `arg:"" optional:"" passthrough:"" name:"program" help:"The program each rank runs, and its arguments ('--' before it ends choreorun's flags)."`
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run is choreorun with args; it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var c cli
	exited := -1
	p, err := kong.New(&c, kong.Name("choreorun"),
		kong.Description("Start the ranks of a program that joins a choreo group, and watch them to the end."),
		kong.Writers(stdout, stderr), kong.Exit(func(code int) { exited = code }))
	if err != nil {
		fmt.Fprintln(stderr, "choreorun:", err)
		return 1
	}
	_, err = p.Parse(mpirunFlags(args))
	if exited >= 0 { // --help
		return exited
	}
	var spec launch.Spec
	if err == nil {
		spec, err = c.spec()
	}
	if err != nil {
		fmt.Fprintf(stderr, "choreorun: %s\nRun 'choreorun --help' for usage.\n", oneLine(err))
		return 2
	}
	return c.launch(spec, stdin, stdout, stderr)
}

// parse is args' launch, or why there is none.
func parse(args []string) (launch.Spec, error) {
	var c cli
	p, err := kong.New(&c, kong.Name("choreorun"), kong.Exit(func(int) {}))
	if err != nil {
		return launch.Spec{}, err
	}
	if _, err := p.Parse(mpirunFlags(args)); err != nil {
		return launch.Spec{}, err
	}
	return c.spec()
}

// launch runs spec to its end and returns the exit status.
func (c *cli) launch(spec launch.Spec, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	spec.Stdout, spec.Stderr = stdout, stderr
	if spec.Elastic {
		spec.Lost = func(l launch.Loss) {
			fmt.Fprintln(stderr, launch.VerdictPrefix+l.String())
			if l.NoRestart != "" {
				fmt.Fprintf(stderr, "%srank %d is not restarted: %s\n", launch.VerdictPrefix, l.Rank, l.NoRestart)
			}
		}
		spec.RankRestarting = func(r launch.RankRestart) { fmt.Fprintln(stderr, launch.VerdictPrefix+r.String()) }
	}
	if spec.MaxRestarts > 0 && !spec.Elastic {
		spec.Restarting = func(n int, cause error) {
			fmt.Fprintf(stderr, "%srestart %d of %d, every rank: %s\n", launch.VerdictPrefix, n, spec.MaxRestarts, oneLine(cause))
		}
	}
	if c.Agent {
		err = launch.RunNode(spec, stdin)
	} else {
		err = launch.Run(spec)
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, launch.VerdictPrefix+oneLine(err))
	var ee *launch.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, launch.ErrBadArgument):
		return 2
	}
	return 1
}

// spec checks the command line and makes the launch of it.
func (c *cli) spec() (launch.Spec, error) {
	s := launch.Spec{Argv: c.Command, Coordinator: c.Coordinator, NodeRank: c.NodeRank, NNodes: c.NNodes,
		TagOutput: c.TagOutput, LogDir: c.LogDir, Grace: c.Grace, Deadline: c.Deadline,
		PeerLostExit: c.PeerLostExit, Secret: os.Getenv(launch.EnvSecret), Run: os.Getenv(launch.EnvRun),
		Elastic: c.Elastic, MaxRestarts: c.MaxRestarts}
	if len(s.Argv) > 0 && s.Argv[0] == "--" {
		s.Argv = s.Argv[1:]
	}
	if len(s.Argv) == 0 {
		return s, errors.New("no program to run: give it after the flags, such as choreorun -n 4 ./prog")
	}
	hosts, err := c.hosts()
	if err != nil {
		return s, err
	}
	if c.Elastic && len(hosts) > 0 {
		return s, errors.New("--elastic with --hosts or --hostfile: run one choreorun --elastic on each host instead (--nnodes, --node-rank)")
	}
	switch {
	case c.MaxRestarts < 0:
		return s, fmt.Errorf("--max-restarts %d: want 0 or more", c.MaxRestarts)
	case c.MaxRestarts > 0 && (len(hosts) > 0 || c.NNodes > 1):
		return s, errors.New("--max-restarts on several hosts: every host's ranks would have to start over together; restart the launchers instead")
	}
	s.Hosts = hosts
	nodes := max(c.NNodes, 1)
	if len(hosts) > 0 {
		if c.NNodes != 0 && c.NNodes != len(hosts) {
			return s, fmt.Errorf("--nnodes %d for %d hosts", c.NNodes, len(hosts))
		}
		nodes = len(hosts)
	}
	switch {
	case c.N < 0 || c.NProcPerNode < 0:
		return s, errors.New("rank counts must be positive")
	case c.N == 0 && c.NProcPerNode == 0:
		return s, errors.New("how many ranks? give -n N (in all) or --nproc-per-node N")
	case c.NProcPerNode == 0 && c.N%nodes != 0:
		return s, fmt.Errorf("-n %d does not divide among %d hosts", c.N, nodes)
	case c.NProcPerNode == 0:
		s.NProcPerNode = c.N / nodes
	case c.N != 0 && c.N != c.NProcPerNode*nodes:
		return s, fmt.Errorf("-n %d is not --nproc-per-node %d times %d hosts", c.N, c.NProcPerNode, nodes)
	default:
		s.NProcPerNode = c.NProcPerNode
	}
	if s.SSH = strings.Fields(c.SSH); len(s.SSH) == 0 {
		return s, errors.New("--ssh is empty")
	}
	if c.Remote != "" {
		s.Remote = strings.Fields(c.Remote)
	}
	for _, x := range c.Export {
		if strings.Contains(x, "=") {
			s.Env = append(s.Env, x)
			continue
		}
		v, ok := os.LookupEnv(x)
		if !ok {
			return s, fmt.Errorf("-x %s: %s is not set here", x, x)
		}
		s.Env = append(s.Env, x+"="+v)
	}
	for _, e := range c.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return s, fmt.Errorf("--env %q: want KEY=VALUE", e)
		}
		s.Env = append(s.Env, e)
	}
	return s, nil
}

// hosts is --hosts, or the hosts in --hostfile.
func (c *cli) hosts() ([]string, error) {
	if c.Hostfile == "" {
		return c.Hosts, nil
	}
	if len(c.Hosts) > 0 {
		return nil, errors.New("give --hosts or --hostfile, not both")
	}
	f, err := os.Open(c.Hostfile)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var hosts []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		switch f := strings.Fields(line); len(f) {
		case 0:
		case 1:
			hosts = append(hosts, f[0])
		default:
			return nil, fmt.Errorf("%s:%d: want one host a line, got %q", c.Hostfile, n, strings.TrimSpace(line))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s lists no host", c.Hostfile)
	}
	return hosts, nil
}

// valueFlags are the flags that take a value as the next argument.
var valueFlags = map[string]bool{"-n": true, "--np": true, "-np": true, "--nproc-per-node": true, "--nnodes": true,
	"--node-rank": true, "--coordinator": true, "--hosts": true, "--hostfile": true, "--ssh": true, "--remote": true,
	"-x": true, "--export": true, "--env": true, "--log-dir": true, "--grace": true, "--deadline": true,
	"--peer-lost-exit": true}

// mpirunFlags rewrites mpirun's single-dash -np (which a parser would read
// as -n with the value "p") to --np among choreorun's own flags, that is
// before the program.
func mpirunFlags(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		switch {
		case a == "--" || !strings.HasPrefix(a, "-"):
			return out
		case a == "-np" || strings.HasPrefix(a, "-np="):
			out[i] = "-" + a
		}
		if valueFlags[out[i]] {
			i++
		}
	}
	return out
}

// oneLine is err's message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
