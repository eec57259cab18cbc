package main

import (
	"fmt"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// kids is the harness's one registry of child processes; killAll on the
// way out ends them all.
var kids = rig.NewChildren()

// startProc starts argv[0] with argv[1:] and env added to the harness's
// environment, as a registered child.
func startProc(name string, argv, env []string) (*rig.Proc, error) {
	p, err := rig.StartProc(kids, name, argv, env)
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	return p, nil
}
