package collectives

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// DataPath says where a collective's bytes travel. The choreography is the
// same on both: GPU-side updates and waits on the GPU stream, CPU-side
// waits and updates on the comm stream.
type DataPath uint8

// The data paths.
const (
	// DataPathAuto takes the device path for a collective of at least
	// AutoDeviceMinBytes per rank when the group knows that every rank's
	// collectives run on one GPU whose memory the CPU cannot see (WithDevice:
	// the ranks of Local, or of Join when their devices report one IPC
	// identity), and the host path otherwise. The ranks must choose alike
	// at launch (their GPU sides differ), when a rank knows only its own
	// stream: so the group agrees on its devices when it is made, and the
	// choice depends only on what every rank shares (that agreement, the
	// op and its size).
	DataPathAuto DataPath = iota
	// DataPathStaged: the host path everywhere.
	DataPathStaged
	// DataPathDevice: device-resident wherever the path can run (an op
	// with a device plan: all-reduce, all-gather, reduce-scatter,
	// broadcast, all-to-all of equal blocks, send and recv; ranks in this
	// process on one device with peer tables, also on a device whose
	// memory the CPU sees (the sim); or ranks of a joined group in
	// processes sharing one CUDA device, through IPC, send and recv not
	// yet); host-staged elsewhere.
	// Every rank of a group must choose it (ranks on different paths fail
	// with ErrMismatch), and every rank's stream must be on one device
	// (else every rank fails with ErrBadArgument).
	DataPathDevice
	// DataPathNCCL: the engine path (engine.go) for the ranks of a joined
	// group, one device each: all-reduce, all-gather, reduce-scatter of
	// equal blocks and broadcast run in the device's collective engine
	// (NCCL under CUDA, found at run time: CHOREO_NCCL_LIB, else
	// libnccl.so.2); other ops, element types without an engine type
	// (16-bit integers) and devices without an engine take the host path.
	// Every rank of a group must choose it.
	DataPathNCCL
)

func (p DataPath) String() string {
	switch p {
	case DataPathStaged:
		return "staged"
	case DataPathDevice:
		return "device"
	case DataPathNCCL:
		return "nccl"
	}
	return "auto"
}

// DataPathEnv names the environment variable that sets a group's default
// data path when it is made: "staged", "device", "nccl" or "auto".
const DataPathEnv = "CHOREO_DATAPATH"

func dataPathFromEnv() DataPath {
	switch os.Getenv(DataPathEnv) {
	case "staged":
		return DataPathStaged
	case "device":
		return DataPathDevice
	case "nccl":
		return DataPathNCCL
	}
	return DataPathAuto
}

// DataPath is the data path the group was made with (WithDataPath, else
// CHOREO_DATAPATH); each op then takes the device path where it can.
func (g *Group) DataPath() DataPath { return g.cfg.datapath }

// AutoDeviceMinBytes is the smallest payload per rank for which
// DataPathAuto takes the device path. Measured on the H200: below it the
// host path's fixed cost is the lower (in process, a 1-element all-reduce
// took 65 us staged and 170 us on the device path; across 2 processes a
// 4 KiB one 0.12 ms staged and 1.2-1.4 ms on the device path), above it
// the device path's bandwidth wins (64 MiB: 313 GB/s against 5.4 in
// process, 47-51 GB/s against 2.7 across processes).
const AutoDeviceMinBytes = 4 << 20

// WithDevice names the device this rank's collectives run on (their
// streams' device), so that DataPathAuto can take the device path: give
// every rank of Local the same device, and every rank of Join its own
// (Join compares them). A collective whose stream is on another device
// takes the host path under DataPathAuto.
func WithDevice(dev gpu.Device) Option { return func(c *config) { c.dev = dev } }

// sharable reports whether dev is a GPU the device path serves and auto
// should use: its memory hidden from the CPU (where the CPU sees it, the
// host path copies nothing either), peer tables for its kernels.
func sharable(dev gpu.Device) bool {
	if dev == nil || dev.Properties().HostVisibleDeviceMem {
		return false
	}
	_, ok := dev.(gpu.PeerDevice)
	return ok
}

// OneDevice reports whether the group agreed, when it was made, that its
// ranks' collectives run on one device the device path serves
// (WithDevice): DataPathAuto then takes the device path for payloads of
// AutoDeviceMinBytes or more.
func (g *Group) OneDevice() bool { return g.oneDevice }

// WithDataPath sets the group's data path, over CHOREO_DATAPATH.
func WithDataPath(p DataPath) Option { return func(c *config) { c.datapath = p } }

// devicePath reports whether plan p runs on the device-resident path: the
// group's data path asks for it (DataPathDevice, or DataPathAuto for a
// large payload on the group's one device), its op has a device plan, and
// either every rank is in this process (the transport has PeerAccess) and
// the device has peer tables, or the ranks are in separate processes (a
// joined group) and the device shares its memory with them
// (gpu.IPCDevice; collectives only, not send and recv).
func (g *Group) devicePath(p plan) bool {
	d, both := p.desc, p.in != nil && p.hasOut
	switch g.cfg.datapath {
	case DataPathDevice:
	case DataPathAuto:
		if !g.oneDevice || p.s.Device() != g.cfg.dev || d.Count*d.DType.Size() < AutoDeviceMinBytes {
			return false
		}
	default:
		return false
	}
	var planned bool
	switch d.Kind {
	case algo.KindAllReduce, algo.KindReduceScatter:
		// An invalid op stays on the host path, whose match refuses it on
		// every rank (a kernel cannot be queued for it); so does a root out
		// of range.
		planned = both && d.Op.Valid()
	case algo.KindBroadcast:
		planned = both && d.Root >= 0 && d.Root < g.Size()
	case algo.KindAllGather:
		planned = both
	case algo.KindAllToAll:
		planned = both && p.even // uneven blocks start where the peers' counts say, known only at run time
	case algo.KindSend:
		planned = p.in != nil
	case algo.KindRecv:
		planned = p.hasOut
	}
	if !planned {
		return false
	}
	if g.cfg.processes { // ranks in other processes: buffers shared through IPC
		_, ok := p.s.Device().(gpu.IPCDevice)
		return ok && d.Kind != algo.KindSend && d.Kind != algo.KindRecv
	}
	if _, ok := g.t.(transport.PeerAccess); !ok {
		return false
	}
	_, ok := p.s.Device().(gpu.PeerDevice)
	return ok
}

// agreeOnDevice decides, for a joined group, whether every rank's
// collectives run on one GPU the device path serves across processes, for
// DataPathAuto: each rank sends the others its device's IPC identity
// (WithDevice; zeros where it named none, or one the path cannot serve),
// and the group has one device when all are equal and not zero. Every
// rank reaches the same verdict, and every rank exchanges whatever its
// options, so ranks that differ in them still meet.
func (g *Group) agreeOnDevice(ctx context.Context) error {
	mine := make([]byte, 17)
	if d, ok := g.cfg.dev.(gpu.IPCDevice); ok && sharable(g.cfg.dev) {
		id := d.ID()
		mine[0] = 1
		copy(mine[1:], id[:])
	}
	all := make([][]byte, g.Size())
	d := algo.Desc{Kind: algo.KindBarrier, Group: g.id, Seq: 0}
	if err := algo.Exchange(ctx, g.t, d, mine, all); err != nil {
		return fmt.Errorf("agreeing on the ranks' devices: %w", err)
	}
	one := true
	for _, a := range all {
		one = one && a[0] == 1 && bytes.Equal(a, all[0])
	}
	g.oneDevice = one
	return nil
}
