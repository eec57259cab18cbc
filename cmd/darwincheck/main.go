// Command darwincheck type-checks darwin-only packages (choreo's Metal
// backend) against darwinkit's real API on any machine, and lints calls to
// darwinkit methods that always panic and objc.Sel selectors darwinkit
// never sends. See internal/darwincheck and docs/metal.md.
//
// Usage:
//
//	go run ./cmd/darwincheck [-allow-sel sel,...] [-tests=false] [-v] ./gpu/metal ./metalshader
//	go run ./cmd/darwincheck -listtraps github.com/progrium/darwinkit/macos/metal
//
// Exit status: 0 clean, 1 problems found, 2 the check could not run.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/internal/darwincheck"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// selList is a repeatable, comma-separated flag.
type selList []string

func (s *selList) String() string { return strings.Join(*s, ",") }
func (s *selList) Set(v string) error {
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*s = append(*s, x)
		}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("darwincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var allow selList
	fs.Var(&allow, "allow-sel", "selectors to accept although darwinkit never sends them (comma-separated, repeatable)")
	listTraps := fs.String("listtraps", "", "list the always-panicking functions of this darwinkit package and exit")
	verbose := fs.Bool("v", false, "print a summary line")
	tests := fs.Bool("tests", true, "also check the packages' _test.go files")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: darwincheck [-allow-sel sel,...] [-tests=false] [-v] packages...")
		fmt.Fprintln(stderr, "       darwincheck -listtraps importpath")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	start := time.Now()
	c := darwincheck.NewChecker()
	c.AllowSelectors = allow
	c.Tests = *tests
	if *listTraps != "" {
		if err := c.LoadKit(*listTraps, "."); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		traps := c.Traps(*listTraps)
		for _, t := range traps {
			fmt.Fprintln(stdout, t)
		}
		fmt.Fprintf(stderr, "darwincheck: %d functions in %s always panic\n", len(traps), *listTraps)
		return 0
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	dirs, err := darwincheck.ExpandPatterns(".", fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ds, err := c.Check(dirs...)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	for _, d := range ds {
		fmt.Fprintln(stdout, d)
	}
	if *verbose || len(ds) > 0 {
		fmt.Fprintf(stderr, "darwincheck: %d packages for darwin/arm64, %d problems, %d trap functions known, %v\n",
			len(dirs), len(ds), len(c.Traps("")), time.Since(start).Round(time.Millisecond))
	}
	if len(ds) > 0 {
		return 1
	}
	return 0
}
