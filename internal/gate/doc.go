// Package gate bounds what strangers cost a listener.
//
// A listener that authenticates each connection before it trusts it runs
// every handshake through a Gate: a fixed number of slots, one per
// handshake in progress. When the slots are full the oldest handshake is
// cut (its connection closed) to make room, so a flood of connections that
// never speak cannot keep a real peer out: a peer completes its handshake
// in a round trip, long before a flood of the gate's size has arrived
// behind it. Handshakes younger than the gate's minimum age are never cut;
// a connection arriving while every slot holds one is refused at once
// instead, and its dialer tries again.
//
// A Door pairs two gates for a handshake in which the dialer speaks first:
// quiet until the dialer's first message is in (Peek tells, reading
// nothing), spoken after it, and out of both once the dialer has proved
// the secret, so silent connections only ever fill quiet and a connection
// that proved the secret is never cut. The control plane's and both data
// planes' listeners stand behind one each.
//
// The gate sets no deadlines: the listener gives each connection a short
// deadline for its first bytes and for the whole handshake, and calls
// Pass.Done when the handshake ends, however it ends.
package gate
