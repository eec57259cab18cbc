package rig

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Quantile is the q-quantile (nearest rank) of ds, -1 when ds is empty; ds
// is not reordered.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(max(i, 0), len(s)-1)]
}

// FirstFew is up to n of reasons, "; "-separated, and how many more.
func FirstFew(reasons []string, n int) string {
	if len(reasons) <= n {
		return strings.Join(reasons, "; ")
	}
	return strings.Join(reasons[:n], "; ") + fmt.Sprintf("; ... %d more", len(reasons)-n)
}

// Secs is d in seconds with millisecond precision, "-" for a negative d
// (nothing measured).
func Secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}

// MiB is b bytes in MiB with one decimal, "-" for a negative b (nothing
// measured).
func MiB(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
