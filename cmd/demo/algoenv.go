package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/algo"
)

// envAlgorithm forces the host path's algorithm of a launched rank's
// collectives, for benchmarks that compare them over the same links:
// auto (the default), ring, doubling or hierarchical.
const envAlgorithm = "CHOREO_ALGORITHM"

// algorithmOption is the option envAlgorithm asks for (none when unset
// or auto), or an error naming the variable.
func algorithmOption() ([]collectives.Option, error) {
	v := strings.TrimSpace(os.Getenv(envAlgorithm))
	for _, a := range []algo.Algorithm{algo.Auto, algo.Ring, algo.Doubling, algo.Hierarchical} {
		switch {
		case v == "" || v == "auto":
			return nil, nil
		case v == a.String():
			return []collectives.Option{collectives.WithAlgorithm(algo.WithAlgorithm(a))}, nil
		}
	}
	return nil, fmt.Errorf("%s %q: want auto, ring, doubling or hierarchical", envAlgorithm, v)
}
