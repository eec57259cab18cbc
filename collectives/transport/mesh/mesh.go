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

// Close closes the link's connection and what Config.Setup made for it.
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

// Mesh is one rank's authenticated connections to its peers, as Connect
// returns them.
type Mesh struct {
	// Links holds, by rank, the ConnsPerPeer links to each peer in index
	// order; nil at this rank and at the ranks not in Config.Peers.
	Links [][]Link
	// Refused counts the connections refused while the mesh formed (each
	// one, also those reported together to OnRefused).
	Refused uint64
}

// Close closes every link (for a caller that gives the mesh up before it
// takes the links over).
func (m *Mesh) Close() error {
	var err error
	for _, ls := range m.Links {
		for i := range ls {
			err = errors.Join(err, ls[i].Close())
		}
	}
	return err
}
