package launch

import (
	"fmt"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// verdict turns an outcome into the launch's error: nil when every member
// succeeded (in an elastic launch: every member not lost, and at least
// one), else an *ExitError whose message is one line of at most
// MaxSummary bytes. what names a member ("rank"); detail is what a failed
// member last said (its last line, or a node's own verdict).
func verdict(o outcome, what string, deadline time.Duration, peerLost int, detail func(exit) string) error {
	others := func(exclude int) string {
		n := o.stopped - exclude
		switch {
		case n <= 0:
			return ""
		case n == 1:
			return "; 1 other stopped"
		}
		return fmt.Sprintf("; %d others stopped", n)
	}
	tail := ""
	if o.left > 0 {
		tail = fmt.Sprintf("; %d still running after SIGKILL", o.left)
	}
	switch {
	case o.interrupted != nil:
		code := 130
		if s, ok := o.interrupted.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		msg := fmt.Sprintf("interrupted (%v)%s%s", o.interrupted, plural(o.stopped, what, "stopped"), tail)
		return &ExitError{Code: code, msg: cut(msg, MaxSummary), kind: ErrInterrupted}
	case len(o.failed) > 0:
		first := o.first(peerLost)
		head := fmt.Sprintf("%s %d %s after %s", what, first.m.id, first.status(peerLost), round(first.at.Sub(first.m.started)))
		rest := others(0)
		if more := len(o.failed) - 1; more > 0 {
			rest = fmt.Sprintf("; %d more failed", more) + rest
		}
		if len(o.lost) > 0 {
			rest = fmt.Sprintf("; %d lost before", len(o.lost)) + rest
		}
		rest += tail
		msg := head
		if d := oneLine(detail(first)); d != "" {
			msg += ": " + cut(d, MaxSummary-len(head)-len(rest)-2)
		}
		return &ExitError{Code: 1, msg: cut(msg+rest, MaxSummary), kind: ErrFailed}
	case o.timedOut:
		msg := fmt.Sprintf("deadline %v passed%s%s", deadline, plural(o.stopped, what, "stopped"), tail)
		return &ExitError{Code: 1, msg: cut(msg, MaxSummary), kind: ErrTimeout}
	case len(o.lost) > 0 && o.succeeded == 0:
		return allLost(o, what, detail)
	}
	return nil
}

// plural is "; 1 rank stopped", "; 4 ranks stopped" or "".
func plural(n int, what, verb string) string {
	switch n {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("; 1 %s %s", what, verb)
	}
	return fmt.Sprintf("; %d %ss %s", n, what, verb)
}

// round is d to a readable precision.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// oneLine is s with control characters turned to spaces and trimmed.
func oneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s))
}

// cut shortens s to at most n bytes on a character boundary, ending in
// "..." when it cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 3 {
		return ""
	}
	i := n - 3
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}
