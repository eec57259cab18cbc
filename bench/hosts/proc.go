package main

import "github.com/choreo-gpu/choreo/bench/internal/rig"

// kids is the harness's one registry of child processes: stop ends them
// on the way out (interrupt included), and once stopped no child starts.
var kids = rig.NewChildren()

// lastLine is p's last output line that is not empty, cut to n bytes, or
// "(no output)".
func lastLine(p *rig.Proc, n int) string {
	if l := p.LastLine(n); l != "" {
		return l
	}
	return "(no output)"
}
