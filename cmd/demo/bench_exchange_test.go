package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUnevenSplit: every rank sends and receives the whole count, each
// row and each column of the split has exactly one zero, and the shares
// differ.
func TestUnevenSplit(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for _, count := range []int{0, 1, 5, 1024, 1000003} {
			split := unevenSplit(n, count)
			for i := range n {
				sent, got, zeros, zerosIn := 0, 0, 0, 0
				for j := range n {
					sent += split[i][j]
					got += split[j][i]
					if split[i][j] == 0 {
						zeros++
					}
					if split[j][i] == 0 {
						zerosIn++
					}
				}
				if sent != count || got != count {
					t.Fatalf("n %d count %d: rank %d sends %d, receives %d", n, count, i, sent, got)
				}
				if n > 1 && count >= n*(n-1)/2 && (zeros != 1 || zerosIn != 1) {
					t.Fatalf("n %d count %d: rank %d: %d zero sends, %d zero receives, want 1 each: %v", n, count, i, zeros, zerosIn, split)
				}
			}
		}
	}
}

// benchRows counts out's rows by op (with or without a "[rank] " lead) and
// fails t for a row with wrong elements.
func benchRows(t *testing.T, out string) map[string]int {
	t.Helper()
	rows := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			f = f[1:]
		}
		if len(f) == 10 && slices.Contains(benchOps, f[0]) {
			rows[f[0]]++
			if f[9] != "0" {
				t.Errorf("row %q: wrong elements", l)
			}
		}
	}
	return rows
}

// TestBenchExchangeOps: the exchange ops' rows, in process (3 ranks: the
// all-to-all's blocks rounded to the ranks) and across 2 processes, every
// element right, with the line that states the uneven split.
func TestBenchExchangeOps(t *testing.T) {
	ops := "alltoall,alltoallv,gather,scatter,reduce,sendrecv_batch"
	for _, how := range [][]string{
		{"bench", "--inproc", "--ranks", "3"},
		{"launch", "-n", "2", "bench"},
	} {
		t.Run(how[0], func(t *testing.T) {
			args := append(how, "--backend", "sim", "--ops", ops, "--min-size", "4KiB", "--max-size", "16KiB", "--iters", "5")
			cmd, stdout, stderr := demoCmd(t, 3*time.Minute, args...)
			if code := waitDemo(t, cmd.Wait); code != 0 {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			out := stdout.String()
			rows := benchRows(t, out)
			for _, op := range strings.Split(ops, ",") {
				if rows[op] != 2 {
					t.Errorf("%d rows of %s, want 2 (4 KiB, 16 KiB):\n%s", rows[op], op, out)
				}
			}
			n := 3
			if how[0] == "launch" {
				n = 2
			}
			if note := unevenNote(n); !strings.Contains(out, note) {
				t.Errorf("no line %q:\n%s", note, out)
			}
			if how[0] == "bench" && !regexp.MustCompile(`\balltoall +4092 +1023 `).MatchString(out) {
				// 1024 float32 elements, rounded down to 3 equal blocks
				t.Errorf("no 4092-byte all-to-all row:\n%s", out)
			}
		})
	}
}
