package rig

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
)

// ErrNoModule is BuildDemo's answer outside the choreo module.
var ErrNoModule = errors.New("rig: run it inside the choreo module (go env GOMOD is empty), or give -demo")

// BuildDemo builds ./cmd/demo of the module around the working directory
// into dir and returns the executable's path; the build's output goes to
// stderr.
func BuildDemo(dir string, log *zap.SugaredLogger) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("rig: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", ErrNoModule
	}
	exe := filepath.Join(dir, "demo")
	log.Infow("building the demo", "out", exe)
	cmd := exec.Command("go", "build", "-o", exe, "./cmd/demo")
	cmd.Dir = filepath.Dir(mod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("rig: go build ./cmd/demo: %w", err)
	}
	return exe, nil
}

// Executable reports whether path is a regular file someone may execute.
func Executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
