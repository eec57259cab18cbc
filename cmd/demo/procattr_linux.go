//go:build linux

package main

import "syscall"

// pdeathsig reports whether a rank dies with its launcher.
const pdeathsig = true

// rankProcAttr puts a rank in a process group of its own (the launcher
// signals the whole group; the terminal's Ctrl-C reaches the launcher
// only) and has the kernel kill it when the launcher dies, even by
// SIGKILL. Pdeathsig follows the thread that started the process; Go does
// not end its threads while the program runs, except a goroutine's locked
// one, and the launcher locks none.
func rankProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
