package mesh

import (
	"errors"
	"io"
	"net"
)

// Link is one authenticated connection to a peer: the peer's rank, the
// connection's index among the pair's (the same on both sides), which
// side dialed it, the connection itself (its deadlines cleared), what the
// peer announced in the handshake (its Config.Hello) and what
// Config.Setup made for it. The caller owns it once Connect has returned
// it.
type Link struct {
	Peer, Index int
	Dialed      bool
	Conn        net.Conn
	Hello       []byte
	Extra       io.Closer
}

func (l *Link) Close() error {
	var err error
	if l.Conn != nil {
		err = l.Conn.Close()
	}
	if l.Extra != nil {
		err = errors.Join(err, l.Extra.Close())
	}
	return err
}

// Mesh is one rank's authenticated connections, as Connect returns them:
// by rank, the ConnsPerPeer links to each peer in index order (nil at this
// rank and the ranks not in Config.Peers), and how many connections were
// refused while it formed.
type Mesh struct {
	Links   [][]Link
	Refused uint64
}

// Close closes every link.
func (m *Mesh) Close() error {
	var err error
	for _, ls := range m.Links {
		for i := range ls {
			err = errors.Join(err, ls[i].Close())
		}
	}
	return err
}
