package launch

import (
	"bytes"
	"io"
	"sync"
)

// maxPartialLine is how much of an unfinished line a lineWriter holds
// before it writes that part out as a line of its own.
const maxPartialLine = 64 << 10

// sink is one destination shared by several lineWriters (the launcher's
// terminal, or one rank's log file): each line goes out in one Write
// under one lock, so that lines of different ranks (and of stdout and
// stderr) never interleave mid-line.
type sink struct {
	mu  sync.Mutex
	dst io.Writer
}

func (k *sink) write(line []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, _ = k.dst.Write(line) // the terminal going away must not stop a rank
}

// lineWriter is one process's stdout or stderr: it writes whole lines to
// its sink, each led by prefix, and keeps the last non-blank one. A line
// not yet ended waits for its newline, for Flush, or until it reaches
// maxPartialLine bytes. It is safe for concurrent use; Write never fails.
type lineWriter struct {
	mu     sync.Mutex
	sink   *sink // nil: lines are only kept, not written
	prefix []byte
	buf    []byte // the unfinished line
	last   []byte // the last non-blank line, without prefix
	// divert, when set, sees each line first; a line it takes is not
	// written.
	divert func(line []byte) bool
}

func newLineWriter(k *sink, prefix string) *lineWriter {
	return &lineWriter{sink: k, prefix: []byte(prefix)}
}

// Write implements io.Writer.
func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.buf = append(w.buf, b...)
			if len(w.buf) >= maxPartialLine {
				w.emit()
			}
			break
		}
		w.buf = append(w.buf, b[:i]...)
		w.emit()
		b = b[i+1:]
	}
	return n, nil
}

// Flush writes the unfinished line, if any, as a line.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit()
	}
}

// Last is the last non-blank line written so far.
func (w *lineWriter) Last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.last)
}

// emit writes prefix + buf + "\n" and empties buf; w.mu is held.
func (w *lineWriter) emit() {
	defer func() { w.buf = w.buf[:0] }()
	text := w.buf
	if w.divert != nil && w.divert(text) {
		return
	}
	if t := bytes.TrimSpace(text[bytes.LastIndexByte(text, '\r')+1:]); len(t) > 0 {
		w.last = append(w.last[:0], t...) // what a terminal shows of it
	}
	if w.sink == nil {
		return
	}
	line := make([]byte, 0, len(w.prefix)+len(text)+1)
	line = append(append(append(line, w.prefix...), text...), '\n')
	w.sink.write(line)
}
