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
// Config.CMAMin bytes is offered by address: the sender's RTS carries the
// address of its buffer (slot kind slotRTSCMA), and a receiver that can
// read the sender's memory (probed at Connect: process_vm_readv of the
// peer's cmaProbeWord, whose address it announced in the handshake) reads
// the bytes straight from the sender's buffer into its Recv's buffer once
// the Recv is posted, then answers ctlDone. A receiver that cannot read
// answers a plain clear-to-send, and the message goes through the slots.
//
// The sender keeps its buffer unmodified until the receiver's answer: it
// waits in Send. A Send ended by an abort or its context first retracts
// the message (a RETRACT frame with flag 1) and waits for the receiver's
// answer to that (a read in progress ends first), so a buffer is never
// read after its Send returned, except when the peer is lost or this
// endpoint closes: then the Send returns at once, and the peer, which
// loses this rank in turn, fails the Recv (a read that had finished by
// then is delivered).
//
// The receiver reads at most what was offered, into its Recv's buffer,
// whose size must equal the offer's (else ctlCTSSize, as for the slots).
// A read that fails (the sender's process ended, the range is not
// mapped) loses the peer: its operations fail with ErrPeerLost.

// cmaMagic is the value of cmaProbeWord ("choreo-S").
const cmaMagic = 0x532d6f65726f6863

// cmaProbeWord is the word a peer reads to probe cross-memory attach.
var cmaProbeWord uint64 = cmaMagic

// probeAddr is the address of cmaProbeWord, announced in the handshake
// (0 when single copy is off here: the peer does not probe).
func (t *Transport) probeAddr() uint64 {
	if t.cfg.CMAMin < 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&cmaProbeWord)))
}

// DefaultCMAMin is the default Config.CMAMin.
const DefaultCMAMin = 256 << 10

// envCMA overrides Config.CMAMin: "off" (or 0) turns single copy off,
// "auto" is the default, a byte count sets the least message offered by
// address (and reads wherever the host allows it).
const envCMA = "CHOREO_SHM_CMA"

// cmaMinFromEnv applies envCMA to min.
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

// cmaPays reports whether a rank of a group of size ranks (all on this
// host) should read its peers' large messages from their memory, when
// Config.CMAMin is left to the default. One read costs the receiver what
// the sender's copy into the slots and the receiver's copy out of them
// cost the two together; but where process_vm_readv copies much more
// slowly than memcpy (it pins the sender's pages one by one: on a virtual
// machine measured at 4 GB/s against 16-19 GB/s for memcpy, 4 KiB pages),
// two copies beat one. That held there with more ranks than processors
// too, once slots were 1 MiB (a ring chunk in one slot): 4 ranks on 2
// cores, all-reduce of 64 MiB over Open MPI's vader, through the slots
// 1.21-1.50x (medians of 4 sessions) against 1.18-1.29x read by address;
// with 256 KiB slots reading by address had won there (1.19-1.33x against
// 1.06-1.19x). size is kept for a policy that depends on the group.
func cmaPays(size int) bool {
	_ = size
	return cmaFast()
}

// cmaFast measures once whether process_vm_readv of this process's own
// memory copies at least 2/3 as fast as copy (best of a few rounds of 4
// MiB each, a few milliseconds in all; measured 2.2 to 4 times slower
// on the virtual machine above, 16 MiB and 64 MiB more so than 4 MiB).
var cmaFast = sync.OnceValue(func() bool {
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

// cmaPiece is the most bytes read by one process_vm_readv: between pieces
// a read looks whether its Recv was ended.
const cmaPiece = 4 << 20

// errHalted reports a read stopped because its Recv ended.
var errHalted = errors.New("read halted")

// receiveCMA reads message m into Recv r's buffer from the sender's
// memory and ends both: r with nil once every byte is read, or with what
// ended it meanwhile. It runs on r's goroutine, which the match handed m
// (r is busy until then). The sender is answered ctlDone in any case.
// The caller holds p.live.
func (p *peer) receiveCMA(r *op, m *inMsg) {
	p.mu.Lock()
	run := r.stop == nil && p.lost == nil
	p.mu.Unlock()
	var err error
	if run {
		err = p.readAll(r, m)
	}
	if err != nil && err != errHalted {
		p.lose(fmt.Errorf("reading its message of %d bytes from its memory: %w", m.size, err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r.busy = false
	p.clear(m.id, ctlDone)
	if r.stop != nil {
		stop := r.stop
		r.stop = nil
		p.end(r, stop)
	} else if err != nil || !run {
		p.end(r, p.lostOr(err))
	} else {
		p.t.singleCopies.Add(1)
	}
	m.got = m.size
	if q := p.complete(m); q != nil {
		p.match(m.tag, q)
	}
}

// lostOr is p.lost, or err while p is not lost. p.mu is held.
func (p *peer) lostOr(err error) error {
	if p.lost != nil {
		return p.lost
	}
	return err
}

// readAll reads m's bytes into r.buf (len(r.buf) == m.size, checked at
// the match) in pieces, until all are read, r is halted or a read fails.
func (p *peer) readAll(r *op, m *inMsg) error {
	buf := r.buf[:m.size]
	for off := 0; off < len(buf); {
		if r.halt.Load() {
			return errHalted
		}
		if p.down.Load() {
			return errHalted
		}
		k := min(len(buf)-off, cmaPiece)
		n, err := readRemote(p.cmaPID, buf[off:off+k], m.addr+uint64(off))
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("process_vm_readv read nothing")
		}
		off += n
	}
	return nil
}
