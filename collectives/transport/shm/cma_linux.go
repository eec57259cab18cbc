//go:build linux

package shm

import (
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerPID is the process at the other end of a pair's socket, as the
// kernel tells it (SO_PEERCRED: the peer cannot choose it).
func peerPID(nc *net.UnixConn) (int, error) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	if cred.Pid <= 0 {
		return 0, fmt.Errorf("peer pid %d", cred.Pid)
	}
	return int(cred.Pid), nil
}

// probeCMA reports whether this process may read process pid's memory
// (cross-memory attach): it reads the word at addr, which pid announced
// as its cmaProbeWord, and checks its value. Yama's ptrace_scope, a
// container's seccomp profile or a kernel without the call make it fail
// (EPERM, ENOSYS); the transport then copies through the slots.
func probeCMA(pid int, addr uint64) bool {
	if pid <= 0 || addr == 0 || addr%8 != 0 {
		return false
	}
	var w uint64
	n, err := readRemote(pid, unsafe.Slice((*byte)(unsafe.Pointer(&w)), 8), addr)
	return err == nil && n == 8 && w == cmaMagic
}

// readRemote reads len(into) bytes of process pid's memory at addr into
// into with one process_vm_readv; it may read fewer (a short read).
func readRemote(pid int, into []byte, addr uint64) (int, error) {
	if len(into) == 0 {
		return 0, nil
	}
	local := []unix.Iovec{{Base: &into[0]}}
	local[0].SetLen(len(into))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(into)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil {
		return 0, err
	}
	if n < 0 || n > len(into) {
		return 0, errors.New("process_vm_readv: bad count")
	}
	return n, nil
}
