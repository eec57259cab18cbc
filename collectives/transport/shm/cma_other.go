//go:build !linux

package shm

import (
	"errors"
	"net"
)

func peerPID(nc *net.UnixConn) (int, error) { return 0, errors.ErrUnsupported }

func probeCMA(pid int, addr uint64) bool { return false }

func readRemote(pid int, into []byte, addr uint64) (int, error) { return 0, errors.ErrUnsupported }
