package main

import (
	"bytes"
	"io"
	"sync"
)

// maxPartialLine is how much of an unfinished line a prefixWriter holds
// before it writes that part out as a line of its own.
const maxPartialLine = 64 << 10

// lineSink is the launcher's terminal: every rank's lines go to it, each
// in one Write under one lock, so that lines of different ranks (and of
// stdout and stderr) never interleave mid-line.
type lineSink struct {
	mu sync.Mutex
}

func (k *lineSink) write(dst io.Writer, line []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, _ = dst.Write(line) // the terminal going away must not stop a rank
}

// prefixWriter is one rank's stdout or stderr: it writes whole lines to
// dst through sink, each led by prefix. A line not yet ended waits for its
// newline, for Flush, or until it reaches maxPartialLine bytes. It is safe
// for concurrent use; Write never fails.
type prefixWriter struct {
	mu     sync.Mutex
	sink   *lineSink
	dst    io.Writer
	prefix []byte
	buf    []byte // the unfinished line
}

func newPrefixWriter(sink *lineSink, dst io.Writer, prefix string) *prefixWriter {
	return &prefixWriter{sink: sink, dst: dst, prefix: []byte(prefix)}
}

// Write implements io.Writer.
func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.buf = append(p.buf, b...)
			if len(p.buf) >= maxPartialLine {
				p.emit()
			}
			break
		}
		p.buf = append(p.buf, b[:i]...)
		p.emit()
		b = b[i+1:]
	}
	return n, nil
}

// Flush writes the unfinished line, if any, as a line.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.emit()
	}
}

// emit writes prefix + buf + "\n" and empties buf; p.mu is held.
func (p *prefixWriter) emit() {
	line := make([]byte, 0, len(p.prefix)+len(p.buf)+1)
	line = append(append(append(line, p.prefix...), p.buf...), '\n')
	p.sink.write(p.dst, line)
	p.buf = p.buf[:0]
}
