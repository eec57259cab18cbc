package collectives

import "github.com/choreo-gpu/choreo/collectives/transport"

// algoTag names a whole collective (every step) for Abort.
func algoTag(group, seq uint64) transport.Tag { return transport.CollTag(group, seq, 0, 0) }
