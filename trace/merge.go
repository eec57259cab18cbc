package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// EnvDir names the directory in which a launched rank writes its part of
// the trace (PartPath); its launcher merges the parts with MergeDir.
const EnvDir = "CHOREO_TRACE_DIR"

// ErrNoParts is returned by MergeDir when no rank left a part it could
// merge.
var ErrNoParts = errors.New("trace: no rank wrote a part")

// PartPath is where rank writes its part of a launch's trace in dir.
func PartPath(dir string, rank int) string {
	return filepath.Join(dir, "rank-"+strconv.Itoa(rank)+".json")
}

// Merge joins the parts the ranks of a cluster wrote into one trace: each
// part's timestamps are shifted onto a common time base, its epoch less
// its clock offset, the earliest part starting at 0.
func Merge(parts ...*File) (*File, error) {
	type base struct{ epoch, offset int64 }
	bases := make([]base, len(parts))
	var lo int64
	for i, p := range parts {
		ep, err := otherInt(p, otherEpoch)
		if err != nil {
			return nil, fmt.Errorf("trace: merge part %d: %w", i, err)
		}
		off, err := otherInt(p, otherOffset)
		if err != nil {
			return nil, fmt.Errorf("trace: merge part %d: %w", i, err)
		}
		bases[i] = base{ep, off}
		if i == 0 || ep-off < lo {
			lo = ep - off
		}
	}
	m := &File{DisplayTimeUnit: "ns", TraceEvents: []ChromeEvent{},
		OtherData: map[string]any{otherEpoch: strconv.FormatInt(lo, 10), otherOffset: "0"}}
	for i, p := range parts {
		shift := us(bases[i].epoch - bases[i].offset - lo)
		for _, e := range p.TraceEvents {
			if e.Ph != "M" {
				e.TS += shift
			}
			m.TraceEvents = append(m.TraceEvents, e)
		}
	}
	return m, nil
}

func otherInt(f *File, key string) (int64, error) {
	v, ok := f.OtherData[key]
	if !ok {
		return 0, fmt.Errorf("no %s: not a part written by choreo", key)
	}
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("%s is %T, want a string", key, v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return n, nil
}

// MergeResult is what MergeDir found of each rank's part.
type MergeResult struct {
	Merged    []int // ranks whose part was merged whole
	Truncated []int // ranks whose part was cut short: its events before the cut are merged
	Missing   []int // ranks that left no part, or one that could not be read or placed
}

// Note is one line naming the ranks whose part is missing or cut short,
// or "" when every part was merged whole.
func (r MergeResult) Note() string {
	var s []string
	if len(r.Missing) > 0 {
		s = append(s, ranks(r.Missing)+" left no part")
	}
	if len(r.Truncated) > 0 {
		s = append(s, ranks(r.Truncated)+" cut short (the events before the cut are kept)")
	}
	return strings.Join(s, "; ")
}

// ranks is "rank 2" or "ranks 0, 1, 3".
func ranks(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	if len(rs) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// MergeDir merges whatever parts ranks 0..n-1 left in dir (PartPath) into
// one trace at out, written whole or not at all (a temporary file renamed
// into place). A missing part is skipped, a part cut short gives the
// events before the cut; the result says which. It fails only when no
// part can be merged (ErrNoParts) or out cannot be written.
func MergeDir(dir, out string, n int) (MergeResult, error) {
	var res MergeResult
	var parts []*File
	for r := range n {
		p, cut := readPart(PartPath(dir, r))
		switch {
		case p == nil:
			res.Missing = append(res.Missing, r)
			continue
		case cut:
			res.Truncated = append(res.Truncated, r)
		default:
			res.Merged = append(res.Merged, r)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return res, fmt.Errorf("%w in %s", ErrNoParts, dir)
	}
	m, err := Merge(parts...)
	if err != nil {
		return res, err
	}
	return res, WriteFile(out, m)
}

// readPart reads one part: nil if it is absent, unreadable or has no time
// base; cut if it was cut short.
func readPart(path string) (p *File, cut bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer func() { _ = f.Close() }()
	p, err = ReadFile(f)
	if err != nil && !errors.Is(err, ErrTruncated) {
		return nil, false
	}
	if _, terr := otherInt(p, otherEpoch); terr != nil {
		return nil, false
	}
	if _, terr := otherInt(p, otherOffset); terr != nil {
		return nil, false
	}
	return p, err != nil
}

// WriteFile writes f to path whole or not at all: into a temporary file
// beside it, renamed into place.
func WriteFile(path string, f *File) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("trace: write %s: %w", path, err)
	}
	err = tmp.Chmod(0o644) // as os.Create would leave it, not CreateTemp's 0600
	if err == nil {
		err = json.NewEncoder(tmp).Encode(f)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("trace: write %s: %w", path, err)
	}
	return nil
}
