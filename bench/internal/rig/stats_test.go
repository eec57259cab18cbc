package rig

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 3, 2, 4}
	if got := Quantile(ds, 0.5); got != 3 {
		t.Fatalf("median = %v, want 3", got)
	}
	if got := Quantile(ds, 1); got != 5 {
		t.Fatalf("max = %v, want 5", got)
	}
	if ds[0] != 5 {
		t.Fatalf("Quantile reordered its input: %v", ds)
	}
	if got := Quantile(nil, 0.5); got != -1 {
		t.Fatalf("empty = %v, want -1", got)
	}
}

func TestFirstFew(t *testing.T) {
	if got := FirstFew([]string{"a", "b"}, 3); got != "a; b" {
		t.Fatalf("got %q", got)
	}
	if got := FirstFew([]string{"a", "b", "c", "d", "e"}, 3); got != "a; b; c; ... 2 more" {
		t.Fatalf("got %q", got)
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	var mu sync.Mutex
	tb := NewTable(&b, &mu, "T", "a", "b")
	tb.Row("x|y", "1\n2", "dropped")
	tb.Row("only")
	want := "\n### T\n\n| a | b |\n|---|---|\n| x\\|y | 1 2 |\n| only |  |\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	if Secs(-1) != "-" || Secs(1500*time.Millisecond) != "1.500 s" || MiB(1<<20) != "1.0 MiB" {
		t.Fatal("Secs or MiB formats wrong")
	}
}
