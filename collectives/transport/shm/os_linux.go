//go:build linux

package shm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const network = "unixpacket"

// sockName is rank's rendezvous socket for (run, group), in the abstract
// namespace. A run whose name is long or holds other characters than
// letters, digits, '.', '_' and '-' is named by a hash.
func sockName(run string, group uint64, rank int) string {
	return fmt.Sprintf("@choreo-shm/%s/%016x/%d", runTag(run), group, rank)
}

func runTag(run string) string {
	safe := len(run) <= 48
	for _, r := range run {
		safe = safe && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}
	if safe {
		return run
	}
	h := runHash(run)
	return "h" + hex.EncodeToString(h[:])
}

func runHash(run string) [8]byte {
	s := sha256.Sum256([]byte("choreo/shm run " + run))
	return [8]byte(s[:8])
}

// newRegion creates an anonymous shared file (memfd) of size bytes,
// allocates its pages now (a full memory limit fails here, not as a fault
// later), seals its size (the peer cannot shrink it under this rank's
// mapping), and returns it with its mapping.
func newRegion(size int) (*os.File, []byte, error) {
	fd, err := unix.MemfdCreate("choreo-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "choreo-shm")
	fail := func(what string, err error) (*os.File, []byte, error) {
		_ = f.Close()
		return nil, nil, fmt.Errorf("region of %d bytes: %s: %w", size, what, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fail("fallocate", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return f, mem, nil
}

// openRegion maps a region a peer handed over, after checking that it is
// sealed against shrinking (else the peer could make this rank fault)
// and has size bytes.
func openRegion(fd int, size int) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("region seals: %w", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, errors.New("region not sealed against shrinking")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("region stat: %w", err)
	}
	if st.Size != int64(size) {
		return nil, fmt.Errorf("region of %d bytes, want %d", st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("region mmap: %w", err)
	}
	return mem, nil
}

func unmap(mem []byte) {
	if mem != nil {
		_ = unix.Munmap(mem)
	}
}

func supported() error { return nil }
