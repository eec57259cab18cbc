// Command demo is choreo's demo and benchmark driver.
//
//	demo                   # the training-like run: 4 in-process ranks all-reduce gradients
//	demo run --ranks 8 --steps 200 --size 4MiB --dtype bfloat16 --backend sim
//	demo bench             # nccl-tests style sweep of every collective, with a memcpy line
//
// The command line is parsed with github.com/alecthomas/kong, sizes with
// github.com/dustin/go-humanize, the progress bar is
// github.com/schollz/progressbar; all logging goes through zap.
package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kong"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	_ "github.com/choreo-gpu/choreo/gpu/cuda"  // "cuda" where an NVIDIA driver is found
	_ "github.com/choreo-gpu/choreo/gpu/metal" // "metal" on macOS
	_ "github.com/choreo-gpu/choreo/gpu/sim"   // the embedded default
)

// cli is the command line.
type cli struct {
	Verbose bool     `help:"Log runtime events to stderr." short:"v"`
	Run     runCmd   `cmd:"" default:"withargs" help:"Training-like loop: fill gradients, all-reduce, scale, check (the default)."`
	Bench   benchCmd `cmd:"" help:"Sweep every collective over sizes, nccl-tests style, with a memcpy reference."`
}

func main() {
	var c cli
	ctx := kong.Parse(&c, kong.Name("demo"),
		kong.Description("choreo: GPU streams, communication streams and fences as actors; collectives as choreographies."),
		kong.UsageOnError())
	log := zap.NewNop()
	if c.Verbose {
		cfg := zap.NewDevelopmentConfig()
		cfg.Level = zap.NewAtomicLevelAt(zapcore.InfoLevel)
		var err error
		if log, err = cfg.Build(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: logger:", err)
			os.Exit(1)
		}
	}
	defer func() { _ = log.Sync() }()
	if err := ctx.Run(log); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
