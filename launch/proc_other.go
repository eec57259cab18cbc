//go:build !linux

package launch

import "syscall"

// DiesWithLauncher reports whether a started process is killed by the
// kernel when its launcher dies, even by SIGKILL.
const DiesWithLauncher = false

// procAttr puts a started process in a process group of its own (the
// launcher signals the whole group; the terminal's Ctrl-C reaches the
// launcher only).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
