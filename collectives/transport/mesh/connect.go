package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// aLongTimeAgo is a deadline that wakes a blocked socket call at once.
var aLongTimeAgo = time.Unix(1, 0)

// Connect builds this rank's part of the mesh (see the package doc) and
// returns it once every connection to every peer is up. ctx bounds the
// whole; a peer that refuses this rank's secret, handshake version, link
// kind or configuration (or proves a secret that differs) ends it at once,
// since dialling again cannot help. On failure every connection is closed
// and the error names the peers still missing, wrapping that refusal or
// ctx's error, and each one's last failure.
func Connect(ctx context.Context, cfg Config) (*Mesh, error) {
	c, err := cfg.normalize()
	if err != nil {
		closeListener(cfg.Listener)
		return nil, err
	}
	b := newBuilder(c)
	sctx, cancel := context.WithCancel(ctx)
	if b.accepts() {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.acceptLoop(sctx, c.Listener)
		}()
	} else {
		closeListener(c.Listener)
	}
	for _, p := range c.Peers {
		for i := range c.ConnsPerPeer {
			if c.dials(p) {
				b.wg.Add(1)
				go func() {
					defer b.wg.Done()
					b.dialLoop(sctx, p, i)
				}()
			}
		}
	}
	select {
	case <-b.full:
	case <-b.failed:
	case <-ctx.Done():
	}
	cancel()
	closeListener(c.Listener)
	b.wg.Wait()
	b.report.flush()
	m := &Mesh{Links: b.links, Refused: b.report.refused.Load()}
	if missing, why := b.missing(); missing != "" {
		cerr := b.fatal()
		if cerr == nil {
			cerr = transport.CtxError(ctx)
		}
		if cerr == nil {
			cerr = errors.New("incomplete")
		}
		_ = m.Close()
		return nil, fmt.Errorf("%s: connect: %w; not connected: "+missing, append([]any{b.report.prefix, cerr}, why...)...)
	}
	return m, nil
}

func closeListener(l net.Listener) {
	if l != nil {
		_ = l.Close()
	}
}

// builder is the state of one Connect.
type builder struct {
	cfg    Config
	wg     sync.WaitGroup
	full   chan struct{} // closed once every link is attached
	failed chan struct{} // closed by fail: dialling again cannot help
	report reporter

	mu       sync.Mutex
	need     int
	have     int
	links    [][]Link        // by rank; a link's Conn is nil until attached
	reserved map[[2]int]bool // (peer, index) of links being set up by the acceptor
	errs     map[int]error   // last failure per peer
	final    error           // fail's error
}

func newBuilder(cfg Config) *builder {
	b := &builder{
		cfg:      cfg,
		full:     make(chan struct{}),
		failed:   make(chan struct{}),
		links:    make([][]Link, cfg.Size),
		reserved: make(map[[2]int]bool),
		errs:     make(map[int]error),
	}
	b.report = reporter{prefix: fmt.Sprintf("%s mesh: rank %d", cfg.Label, cfg.Rank), on: cfg.OnRefused}
	for _, p := range cfg.Peers {
		b.links[p] = make([]Link, cfg.ConnsPerPeer)
		b.need += cfg.ConnsPerPeer
	}
	if b.need == 0 {
		close(b.full)
	}
	return b
}

func (b *builder) accepts() bool {
	for _, p := range b.cfg.Peers {
		if !b.cfg.dials(p) {
			return true
		}
	}
	return false
}

// reserve claims link (p, i) for an acceptor's handshake that has
// authenticated its dialer; false if it is claimed already, or up while
// the mesh is complete. A link that is up while the mesh is still forming
// gives way: its dialer, who proved the secret again with fresh nonces,
// dials again only when it took the first for failed (its end broke
// after the acceptor's verdict), so the newer connection is the one both
// sides keep.
func (b *builder) reserve(p, i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.links[p][i]
	if b.reserved[[2]int{p, i}] || (old.Conn != nil && b.have == b.need) {
		return false
	}
	if old.Conn != nil {
		old.Close()
		b.links[p][i] = Link{}
		b.have--
	}
	b.reserved[[2]int{p, i}] = true
	return true
}

func (b *builder) unreserve(p, i int) {
	b.mu.Lock()
	delete(b.reserved, [2]int{p, i})
	b.mu.Unlock()
}

// attach installs an authenticated, set up link in its place.
func (b *builder) attach(l Link) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.reserved, [2]int{l.Peer, l.Index})
	b.links[l.Peer][l.Index] = l
	delete(b.errs, l.Peer)
	b.have++
	if b.have == b.need {
		close(b.full)
	}
}

func (b *builder) noteErr(p int, err error) {
	b.mu.Lock()
	b.errs[p] = err
	b.mu.Unlock()
}

// fail ends Connect with err, once: a dial failed in a way that dialling
// again cannot mend.
func (b *builder) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.final == nil {
		b.final = err
		close(b.failed)
	}
}

// fatal is fail's error, nil if none.
func (b *builder) fatal() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.final
}

// missing names the peers without all their links: a format ("rank 2
// (%w), rank 3") and its arguments, their last failures.
func (b *builder) missing() (string, []any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	var why []any
	for _, p := range b.cfg.Peers {
		up := 0
		for _, l := range b.links[p] {
			if l.Conn != nil {
				up++
			}
		}
		if up == len(b.links[p]) {
			continue
		}
		s := fmt.Sprintf("rank %d", p)
		if e := b.errs[p]; e != nil {
			s += " (%w)"
			why = append(why, e)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", "), why
}

// settle runs Config.Setup on an authenticated link and attaches it. The
// handshake's bound (hctx, which stop ends) covers the authentication
// only: Setup runs under ctx, the whole mesh's, since both ends know the
// secret by then and a loaded host can take seconds to set a pair up; a
// dialer that gave up there after its acceptor had kept the link would
// leave the acceptor, its mesh complete, a link nobody reads. On failure
// it closes what Setup made; the caller closes the connection.
func (b *builder) settle(ctx, hctx context.Context, l *Link, stop func() bool) error {
	if !stop() {
		return transport.CtxError(hctx)
	}
	var err error
	if b.cfg.Setup != nil {
		_ = l.Conn.SetDeadline(time.Time{}) // the handshake's
		unbound := bound(ctx, l.Conn)
		if err = b.cfg.Setup(ctx, l); err != nil {
			err = fmt.Errorf("setup: %w", err)
		}
		if !unbound() && err == nil {
			err = transport.CtxError(ctx)
		}
	}
	if err == nil {
		err = l.Conn.SetDeadline(time.Time{})
	}
	if err != nil {
		if l.Extra != nil {
			_ = l.Extra.Close()
			l.Extra = nil
		}
		return err
	}
	b.attach(*l)
	return nil
}
