//go:build linux

package launch

import "syscall"

// DiesWithLauncher reports whether a started process is killed by the
// kernel when its launcher dies, even by SIGKILL.
const DiesWithLauncher = true

// procAttr puts a started process in a process group of its own (the
// launcher signals the whole group; the terminal's Ctrl-C reaches the
// launcher only) and has the kernel kill it when the launcher dies.
// Pdeathsig follows the thread that started the process; Go does not end
// its threads while the program runs, except a goroutine's locked one,
// and the launcher locks none.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
