package remoting

import (
	"net"
	"time"

	"github.com/choreo-gpu/choreo/internal/gate"
)

// firstWait is how long a control server waits, outside the gates, for a
// client's first message to arrive before it seats the connection in the
// quiet gate: a client writes it right after connecting, but on a loaded
// machine it may land a little after the server has taken the connection
// up.
const firstWait = 50 * time.Millisecond

// admit seats c behind door (see gate.Door): in spoken when the fixed part
// of the client's first message (version, nonce, address length) is in
// within firstWait, peeked and not read, else in quiet. It leaves c's read
// deadline at end. The caller calls Leave on the guest when the handshake
// ends, however it ends.
func admit(door *gate.Door, c net.Conn, end time.Time) (*gate.Guest, error) {
	wait := time.Now().Add(firstWait)
	if end.Before(wait) {
		wait = end
	}
	var b [hsClientFixed]byte
	n := gate.Peek(c, b[:], wait, func(in []byte) bool { return in[0] == hsVersion })
	spoke := n == hsClientFixed && b[0] == hsVersion && b[hsClientFixed-1] != 0
	_ = c.SetReadDeadline(end)
	return door.Admit(c, spoke)
}
