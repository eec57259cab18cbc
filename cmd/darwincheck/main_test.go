package main

import (
	"bytes"
	"strings"
	"testing"
)

// The command exits 1 and prints the problems for a bad package, and 2
// when it cannot run.
func TestExitStatus(t *testing.T) {
	var out, errOut bytes.Buffer
	if rc := run([]string{"../../internal/darwincheck/testdata/bad"}, &out, &errOut); rc != 1 {
		t.Errorf("bad fixture: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", rc, &out, &errOut)
	}
	for _, want := range []string{"bad_darwin.go:", ": type: ", ": trap: ", ": sel: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if rc := run(nil, &out, &errOut); rc != 2 {
		t.Errorf("no packages: exit %d, want 2", rc)
	}
	if rc := run([]string{"./no/such/dir"}, &out, &errOut); rc != 2 {
		t.Errorf("missing package: exit %d, want 2", rc)
	}
}
