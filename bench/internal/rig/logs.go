package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// LogsDir is given when set, else a new name under the temporary directory
// made of prefix and the time now (the directory itself is made by the
// first SaveLog).
func LogsDir(given, prefix string) string {
	if given != "" {
		return given
	}
	return filepath.Join(os.TempDir(), prefix+time.Now().Format("20060102-150405"))
}

// SaveLog writes text to dir (made if missing) as name and returns the
// file's path.
func SaveLog(dir, name, text string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("rig: log directory: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("rig: save log: %w", err)
	}
	return path, nil
}
