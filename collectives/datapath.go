package collectives

import (
	"os"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// DataPath says where a collective's bytes travel (DESIGN section 3). The
// choreography is the same on both: GPU-side updates and waits on the GPU
// stream, CPU-side waits and updates on the comm stream.
type DataPath uint8

// The data paths.
const (
	// DataPathAuto is the host path for now. The device path needs every
	// rank's buffers on one device, and the ranks must choose alike at
	// launch (their GPU sides differ), when a rank knows only its own
	// device: ranks on two devices, or on a staged and a visible one, would
	// choose differently and fail. Choosing it automatically needs the
	// group to agree on its ranks' devices when it is made.
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

// WithDataPath sets the group's data path, over CHOREO_DATAPATH.
func WithDataPath(p DataPath) Option { return func(c *config) { c.datapath = p } }

// devicePath reports whether plan p runs on the device-resident path: the
// group's data path asks for it, its op has a device plan, and either every
// rank is in this process (the transport has PeerAccess) and the device has
// peer tables, or the ranks are in separate processes (a joined group) and
// the device shares its memory with them (gpu.IPCDevice; collectives only,
// not yet send and recv).
func (g *Group) devicePath(p plan) bool {
	if g.cfg.datapath != DataPathDevice {
		return false
	}
	d, both := p.desc, p.in != nil && p.hasOut
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
