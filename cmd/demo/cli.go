package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// exitUsage is the status of a command line the demo refuses (as Go's
// flag package and most Unix tools exit).
const exitUsage = 2

// Errors of a command line.
var (
	// errUnknownCommand is a command word the demo does not have.
	errUnknownCommand = errors.New("unknown command")
	// errMissingValue is a flag given without its value.
	errMissingValue = errors.New("missing value")
)

// parseArgs parses the command line into c. A command line the demo
// refuses yields one line naming the fault and one with a hint, written
// to stderr, and exitUsage; help yields the help and exit status 0. ok is
// false when the demo should exit with code rather than run.
func parseArgs(c *cli, args []string, stdout, stderr io.Writer) (ctx *kong.Context, code int, ok bool) {
	exited := false
	p, err := kong.New(c, kong.Name("demo"),
		kong.Description("choreo: GPU streams, communication streams and fences as actors; collectives as choreographies."),
		kong.Writers(stdout, stderr), kong.Exit(func(int) { exited = true }))
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return nil, 1, false
	}
	args = aliasArgs(args)
	if path, err := unknownCommand(p.Model.Node, args); err != nil {
		usageError(stderr, err, path)
		return nil, exitUsage, false
	}
	ctx, err = p.Parse(args)
	if exited { // --help: written
		return nil, 0, false
	}
	if err != nil {
		var pe *kong.ParseError
		_ = errors.As(err, &pe)
		usageError(stderr, err, parsedPath(pe))
		return nil, exitUsage, false
	}
	if err := unknownRankCommand(p.Model.Node, c.Launch.Args, ctx.Command()); err != nil {
		usageError(stderr, err, "launch")
		return nil, exitUsage, false
	}
	return ctx, 0, true
}

// unknownRankCommand finds, in the rank command line args of a launch
// (command), a first word that is not a command of `demo node`.
func unknownRankCommand(top *kong.Node, args []string, command string) error {
	if !strings.HasPrefix(command, "launch") || len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return nil
	}
	for _, n := range top.Children {
		if n.Type == kong.CommandNode && n.Name == "node" {
			if _, err := unknownCommand(n, args[:1]); err != nil {
				return fmt.Errorf("%w %q: demo launch runs one of %s", errUnknownCommand, args[0], strings.Join(commandNames(n), ", "))
			}
		}
	}
	return nil
}

// usageError writes err as one line and a hint to the help of the
// command at path ("" the demo's, "launch", "node run").
func usageError(w io.Writer, err error, path string) {
	fmt.Fprintf(w, "demo: %v\n", err)
	if path != "" {
		path += " "
	}
	fmt.Fprintf(w, "  see 'demo %s--help'\n", path)
}

// aliasArgs spells the launchers' conventional flags as the demo's:
// -np N (mpirun's) as -n N. Arguments after "--" are left alone.
func aliasArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		switch {
		case a == "-np" || a == "--np":
			out = append(out, "-n")
		case strings.HasPrefix(a, "-np=") || strings.HasPrefix(a, "--np="):
			out = append(out, "-n", a[strings.IndexByte(a, '=')+1:])
		default:
			out = append(out, a)
		}
	}
	return out
}

// unknownCommand finds a word where a command is expected that names
// none: kong would otherwise take it for an argument of the default
// command and show that command's help. It walks the commands the words
// name, from the top, past the flags that take no value; it stops at the
// first other flag (the rest is the default command's) or at a command
// that has no subcommands. path is the command the word was given to.
func unknownCommand(top *kong.Node, args []string) (path string, err error) {
	node := top
	for _, a := range args {
		var cmds []*kong.Node
		for _, ch := range node.Children {
			if ch.Type == kong.CommandNode && !ch.Hidden {
				cmds = append(cmds, ch)
			}
		}
		if len(cmds) == 0 || a == "--" {
			return "", nil
		}
		if strings.HasPrefix(a, "-") {
			if boolFlag(node, a) {
				continue
			}
			return "", nil
		}
		i := slices.IndexFunc(cmds, func(n *kong.Node) bool { return n.Name == a || slices.Contains(n.Aliases, a) })
		if i < 0 {
			where := "demo"
			if p := commandPath(node); p != "" {
				where += " " + p
			}
			return commandPath(node), fmt.Errorf("%w %q: %s has %s", errUnknownCommand, a, where, strings.Join(commandNames(node), ", "))
		}
		node = cmds[i]
	}
	return "", nil
}

// commandNames are the names of node's visible subcommands.
func commandNames(node *kong.Node) []string {
	var names []string
	for _, ch := range node.Children {
		if ch.Type == kong.CommandNode && !ch.Hidden {
			names = append(names, ch.Name)
		}
	}
	return names
}

// boolFlag reports whether a is a flag of node (or above) that takes no
// value: -h, --help, -v, --verbose.
func boolFlag(node *kong.Node, a string) bool {
	for n := node; n != nil; n = n.Parent {
		for _, f := range n.Flags {
			if !f.IsBool() {
				continue
			}
			if a == "--"+f.Name || f.Short != 0 && a == "-"+string(f.Short) {
				return true
			}
		}
	}
	return a == "-h" || a == "--help"
}

// commandPath is the words of the command n is ("" for the top, "node
// run").
func commandPath(n *kong.Node) string {
	var words []string
	for ; n != nil; n = n.Parent {
		if n.Type == kong.CommandNode {
			words = append([]string{n.Name}, words...)
		}
	}
	return strings.Join(words, " ")
}

// parsedPath is the command a parse error arose in ("" if not known).
func parsedPath(pe *kong.ParseError) string {
	if pe == nil || pe.Context == nil {
		return ""
	}
	return commandPath(pe.Context.Selected())
}
