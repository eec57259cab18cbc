//go:build !linux

package shm

import (
	"errors"
	"fmt"
	"os"
)

// The transport needs Linux: anonymous sealed shared files (memfd) and
// abstract socket names. Elsewhere ConnectLinks fails with errUnsupported and
// callers keep to TCP.
var errUnsupported = fmt.Errorf("shm: %w: shared-memory transport needs Linux", errors.ErrUnsupported)

const network = "unixpacket"

func sockName(run string, group uint64, rank int) string { return "" }

func runHash(run string) [8]byte { return [8]byte{} }

func newRegion(size int) (*os.File, []byte, error) { return nil, nil, errUnsupported }

func openRegion(fd int, size int) ([]byte, error) { return nil, errUnsupported }

func unmap(mem []byte) {}

func supported() error { return errUnsupported }
