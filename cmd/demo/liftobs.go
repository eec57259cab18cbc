package main

import (
	"fmt"
	"strings"
	"time"
)

// liftObsFlags takes --trace, --metrics and --metrics-linger out of a
// launch's rank command line (args: run or bench and their flags) into
// obs, where obs does not set them already, and returns the rest: the
// launcher, not each rank, must see them, to merge the ranks' trace parts
// into one file and give each rank its own metrics port. Arguments after
// "--" are left alone.
func liftObsFlags(args []string, obs *obsFlags) ([]string, error) {
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), nil
		}
		name, val, hasVal := strings.Cut(a, "=")
		var dst *string
		var linger bool
		switch name {
		case "--trace":
			dst = &obs.Trace
		case "--metrics":
			dst = &obs.Metrics
		case "--metrics-linger":
			linger = true
		default:
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s: %w: it needs a value", name, errMissingValue)
			}
			i++
			val = args[i]
		}
		if linger {
			d, err := time.ParseDuration(val)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if obs.MetricsLinger == 0 {
				obs.MetricsLinger = d
			}
			continue
		}
		if *dst == "" {
			*dst = val
		}
	}
	return rest, nil
}
