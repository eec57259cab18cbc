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
	// DataPathDevice: device-resident wherever the path can run (ranks in
	// this process on one device with peer tables, an op with a device
	// plan: all-reduce, all-gather, reduce-scatter, broadcast, all-to-all
	// of equal blocks, send and recv), also on a
	// device whose memory the CPU sees (the sim); host-staged elsewhere.
	// Every rank of a group must choose it (ranks on different paths fail
	// with ErrMismatch), and every rank's stream must be on one device
	// (else every rank fails with ErrBadArgument).
	DataPathDevice
)

func (p DataPath) String() string {
	switch p {
	case DataPathStaged:
		return "staged"
	case DataPathDevice:
		return "device"
	}
	return "auto"
}

// DataPathEnv names the environment variable that sets a group's default
// data path when it is made: "staged", "device" or "auto".
const DataPathEnv = "CHOREO_DATAPATH"

func dataPathFromEnv() DataPath {
	switch os.Getenv(DataPathEnv) {
	case "staged":
		return DataPathStaged
	case "device":
		return DataPathDevice
	}
	return DataPathAuto
}

// WithDataPath sets the group's data path, over CHOREO_DATAPATH.
func WithDataPath(p DataPath) Option { return func(c *config) { c.datapath = p } }

// devicePath reports whether plan p runs on the device-resident path: the
// group's data path asks for it, its op has a device plan, every rank is in
// this process (the transport has PeerAccess) and the device has peer
// tables.
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
	if _, ok := g.t.(transport.PeerAccess); !ok {
		return false
	}
	_, ok := p.s.Device().(gpu.PeerDevice)
	return ok
}
