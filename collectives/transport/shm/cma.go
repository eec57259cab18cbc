package shm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Single copy (cross-memory attach). A rendezvous message of at least
// Config.CMAMin bytes is offered by address (slot kind slotRTSCMA). A
// receiver that can read the sender's memory (probed at ConnectLinks:
// process_vm_readv of the peer's cmaProbeWord, whose address it announced
// in the handshake) hands the offer on to its Endpoint, whose Recv reads
// the bytes with ReadAt; one that cannot hands on no address, and the
// message goes through the slots. A read that fails loses the peer.

// cmaProbeWord is the word a peer reads to probe cross-memory attach;
// cmaMagic ("choreo-S") is its value.
const cmaMagic = 0x532d6f65726f6863

var cmaProbeWord uint64 = cmaMagic

// probeAddr is the address of cmaProbeWord (0: single copy off here).
func (c *Config) probeAddr() uint64 {
	if c.CMAMin < 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&cmaProbeWord)))
}

// DefaultCMAMin is the default Config.CMAMin.
const DefaultCMAMin = 256 << 10

// envCMA overrides Config.CMAMin: "off" (or 0), "auto", or a byte count.
const envCMA = "CHOREO_SHM_CMA"

func cmaMinFromEnv(min int) (int, error) {
	v := strings.TrimSpace(os.Getenv(envCMA))
	if v == "" {
		return min, nil
	}
	switch strings.ToLower(v) {
	case "off", "no", "false", "0":
		return -1, nil
	case "auto":
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return min, fmt.Errorf("%s=%q: want off or a byte count", envCMA, v)
	}
	return n, nil
}

// maxUserAddr bounds the addresses a process maps (user space is below
// 2^47 on amd64, 2^52 on arm64, 2^56 with five-level page tables).
const maxUserAddr = 1 << 57

// cmaPays reports whether this rank should read its peers' large
// messages from their memory when Config.CMAMin is left to the default:
// whether process_vm_readv of its own memory copies at least 2/3 as fast
// as copy (best of three rounds of 4 MiB, measured once). It pins the
// sender's pages one by one, and where that is much slower than memcpy
// (on a virtual machine, 4 GB/s against 16-19), two copies beat one.
var cmaPays = sync.OnceValue(func() bool {
	const n, rounds = 4 << 20, 3
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	addr := uint64(uintptr(unsafe.Pointer(&src[0])))
	pid := os.Getpid()
	best := func(f func() bool) time.Duration {
		b := time.Duration(math.MaxInt64)
		for range rounds {
			start := time.Now()
			if !f() {
				return b
			}
			b = min(b, time.Since(start))
		}
		return b
	}
	cp := best(func() bool { copy(dst, src); return true })
	rd := best(func() bool {
		for off := 0; off < n; {
			k, err := readRemote(pid, dst[off:], addr+uint64(off))
			if err != nil || k == 0 {
				return false
			}
			off += k
		}
		return true
	})
	runtime.KeepAlive(src)
	return 2*rd <= 3*cp
})

// cmaPiece is the most bytes read by one process_vm_readv.
const cmaPiece = 4 << 20

// ReadAt reads with process_vm_readv, in pieces of at most cmaPiece bytes.
func (l *link) ReadAt(dst []byte, addr uint64, off int) error {
	if l.cmaPID == 0 {
		return errors.New("shm: this process may not read the peer's memory")
	}
	for done := 0; done < len(dst); {
		if l.down.Load() {
			return l.downErr()
		}
		k := min(len(dst)-done, cmaPiece)
		n, err := readRemote(l.cmaPID, dst[done:done+k], addr+uint64(off+done))
		if err != nil {
			return fmt.Errorf("shm: process_vm_readv: %w", err)
		}
		if n == 0 {
			return errors.New("shm: process_vm_readv read nothing")
		}
		done += n
	}
	return nil
}
