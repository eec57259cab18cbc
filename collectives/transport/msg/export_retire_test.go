package msg

// Held is what this rank holds of peer's messages: its tag queues, its
// announced messages, and the window bytes they fill (not handed back or
// owed).
func (e *Endpoint) Held(peer int) (queues, announced int, window int64) {
	p := e.peers[peer]
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queues), p.rts, p.inBuf - p.owed
}
