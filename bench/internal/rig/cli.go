package rig

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrUnknownName is Names's answer for a name not among the known ones,
// or for an empty list.
var ErrUnknownName = errors.New("rig: unknown name")

// Main is a harness's main: it parses the command line with parse (-h
// prints the usage and exits 0; a bad command line prints the error and
// exits with usageExit), runs run with the progress logger and exits with
// its status.
func Main[C any](parse func([]string) (C, error), run func(C, *zap.SugaredLogger) int, usageExit int) {
	cfg, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(usageExit)
	}
	log := NewLogger()
	code := run(cfg, log)
	_ = log.Sync()
	os.Exit(code)
}

// NewLogger is the progress logger: short console lines on stderr.
func NewLogger() *zap.SugaredLogger {
	ec := zap.NewDevelopmentEncoderConfig()
	ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05")
	ec.EncodeCaller = nil
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(ec), zapcore.Lock(os.Stderr), zapcore.InfoLevel)
	return zap.New(core).Sugar()
}

// NewRand is a random source seeded by seed, or by the clock when seed is
// 0; it returns the seed used, for the run's record. Not safe for
// concurrent use.
func NewRand(seed uint64) (*rand.Rand, uint64) {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed
}

// Names is s's comma-separated names, each checked against known; an
// unknown name or an empty list is an error wrapping ErrUnknownName.
func Names(s string, known []string) ([]string, error) {
	var out []string
	for _, n := range Split(s) {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownName, n, strings.Join(known, ", "))
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: an empty list", ErrUnknownName)
	}
	return out, nil
}

// Split is s's comma-separated items, trimmed, empty ones dropped.
func Split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
