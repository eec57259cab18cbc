// Package mesh builds one rank's part of an authenticated full mesh: the
// connections between the ranks of a group that a kind of link (tcp, shm)
// carries its bytes over, each authenticated by the group's shared
// secret. A link package makes the listener and says how to dial a peer;
// mesh decides who dials whom, runs the handshake on every connection,
// refuses strangers at a bounded cost, and returns each peer's
// connections with what the peer announced.
//
//	m, err := mesh.Connect(ctx, mesh.Config{
//		Rank: r, Size: n, Group: id, Secret: secret, Label: "tcp",
//		Listener: ln, Dial: func(ctx context.Context, p int) (net.Conn, error) { ... },
//		Hello: myLimits,
//	})
//
// m.Links[p] then holds the Config.ConnsPerPeer connections to peer p,
// each with the peer's Hello; Config.Setup runs on each once both sides
// are authenticated, for what a link must exchange before it is used (a
// shared region's descriptor, say).
//
// # Handshake
//
// Four fixed-size messages (see hsMsg for the layout):
//
//  1. hello (dialer): its view of the group, its payload and a fresh
//     nonce.
//  2. challenge (acceptor): its view, its payload and a fresh nonce; or a
//     refusal status (version, group, label, ranks, configuration) and the
//     close.
//  3. proof (dialer): HMAC-SHA256(secret, "choreo/mesh/v1 <label> dialer
//     proof" || hello || challenge).
//  4. verdict (acceptor): a status and, when the proof holds,
//     HMAC-SHA256(secret, "choreo/mesh/v1 <label> acceptor proof" ||
//     hello || challenge), which the dialer checks.
//
// Both nonces are in every MAC, so a recorded handshake replays to
// nothing; the acceptor proves nothing before the dialer has, and a proof
// for one label is none for another. The payloads are authenticated but
// not secret.
//
// # Strangers
//
// Anything else (a stranger, a wrong secret, a rank of another group,
// garbage, a second connection in a link's place, a client silent for 2 s,
// or HandshakeTimeout if shorter) is closed, counted in Mesh.Refused and
// passed to Config.OnRefused, wrapping one of the package's sentinel
// errors. Every handshake waits behind a gate.Door, so a flood of
// connections costs each a goroutine and a fixed buffer, a bounded number
// at a time, and cannot keep the ranks out; those turned away for room
// are reported together, at most once a second. The package logs nothing.
package mesh
