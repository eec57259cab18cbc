// Package launch starts the ranks of a program that joins a group
// (cluster.Join with cluster.FromEnv) and watches them to the
// end: on one host, on several hosts with one launcher each (as torchrun
// does), or on several hosts from one launcher over SSH (as mpirun and
// mlx.launch do). cmd/choreorun is its command line; `demo launch` uses
// it too.
//
//	err := launch.Run(launch.Spec{Argv: []string{"./prog", "--steps", "10"}, NProcPerNode: 4, TagOutput: true})
//	var ee *launch.ExitError
//	if errors.As(err, &ee) { // one line: which rank failed, how, its last line
//		fmt.Fprintln(os.Stderr, "prog:", err)
//		os.Exit(ee.Code)
//	}
//
// Each rank gets CHOREO_RANK, CHOREO_LOCAL_RANK (its index on its node),
// CHOREO_WORLD_SIZE, CHOREO_COORDINATOR (rank 0's control-plane
// host:port), CHOREO_SECRET, CHOREO_RUN and GOMAXPROCS (the host's
// processors shared out, unless set), over the environment it inherits
// and under Spec.Env. Only rank 0's port is known up front: every other
// rank binds its own ports and reports them at the rendezvous. On one
// host the launcher picks rank 0's port itself, at random outside the
// kernel's ephemeral port range and free when probed, so that no port a
// rank binds with port 0 and no outgoing connection can take it in the
// moment between the probe and rank 0's bind (rank 0's control plane
// binds by address, so the launcher cannot hand it an open listener).
// With several nodes the coordinator is given (the same host:port to
// every node's launcher, and the same CHOREO_SECRET).
//
// The secret is made per launch (32 random bytes in hex) unless given,
// and it reaches the ranks through their environment only: never a
// command line, also across SSH, where it travels on the SSH command's
// standard input to the choreorun on the other host.
//
// Each rank runs in a process group of its own and, on Linux, dies with
// its launcher even when the launcher is killed outright. A rank that
// exits unsuccessfully, at start or later, stops the launch: every other
// rank gets SIGTERM, then SIGKILL after the grace period, and Run returns
// an *ExitError of one line of at most MaxSummary bytes ("rank 17 exited
// 1 after 0.42s: <its last line, cut>; 255 others stopped"). A signal
// (Ctrl-C) stops every rank the same way, and Run's error carries exit
// status 128 + the signal.
//
// An elastic launch (Spec.Elastic) is one whose ranks go on without a
// lost rank (they shrink their group, collectives.Group.Shrink): each
// rank calls Joined once its group has formed (collectives/cluster's Join
// does), and from then on its death
// or unsuccessful exit does not stop the others. Spec.Lost hears of each
// such loss (choreorun prints one line: "lost rank 2: killed by SIGKILL
// after 3.1s; 3 ranks go on"), and the launch ends when every rank has
// exited: Run returns nil when at least one rank exited 0 and every rank
// still running when the first did so exited 0 as well. A rank that fails
// before it called Joined, or after the first success, ends the launch as
// above.
//
// A launch with Spec.MaxRestarts (one node) may start ranks again, up to
// that many times in all. Without Spec.Elastic it starts every rank again
// when it fails, as torchrun does: each start under a run of its own, its
// ranks told the count in CHOREO_RESTART_COUNT. An elastic launch instead
// starts a lost rank alone again, at once, with its rank's environment
// (the same run, coordinator and secret) and CHOREO_RESTART_COUNT the
// number of times that rank has been started again (1 the first time):
// it rejoins the group its survivors run on when they grow it
// (collectives.Group.Grow), and calls Joined again. Spec.Lost hears of
// the loss first, then Spec.RankRestarting of the restart (choreorun:
// "restarting rank 2 (restart 1 of 3; CHOREO_RESTART_COUNT=1)"). A
// restarted rank that dies or fails, before it rejoined or after, is lost
// as any (the others go on) and may be started again while restarts
// remain; each process lost counts in the verdict above, not each rank.
// No rank is restarted once the launch is ending (an interruption, the
// deadline, a failure, a rank that exited 0, no other rank running), and
// rank 0 never is, nor any rank after rank 0 was lost: rank 0 hosts the
// group's rendezvous, without which no rank can rejoin.
//
// Output comes back line by line (never two ranks' lines mixed within
// one), each led by "[rank] " with Spec.TagOutput, or into one file per
// rank with Spec.LogDir.
package launch
