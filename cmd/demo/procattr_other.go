//go:build !linux

package main

import "syscall"

// pdeathsig reports whether a rank dies with its launcher.
const pdeathsig = false

// rankProcAttr puts a rank in a process group of its own (the launcher
// signals the whole group; the terminal's Ctrl-C reaches the launcher
// only). Outside Linux nothing kills the ranks of a launcher that was
// itself killed by SIGKILL: they run on until they end or fail.
func rankProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
