package launch

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ephemeralRange is where the kernel takes the ports of bind(":0") and of
// outgoing connections: Linux's ip_local_port_range, else the IANA range
// (the BSDs and macOS).
func ephemeralRange() (lo, hi int) {
	lo, hi = 49152, 65535
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}

// choosePort picks a free TCP port on host for rank 0's control plane, at
// random outside the kernel's ephemeral range: the launcher cannot hand
// rank 0 a bound listener (its control plane binds by address), so it
// must release the port it probed; outside the ephemeral range no
// bind(":0") and no outgoing connection of any process (the ranks' own
// included) can take it before rank 0 binds it. Only a program binding
// that very port by number could.
func choosePort(host string) (int, error) {
	lo, hi := ephemeralRange()
	var spans [][2]int // [first, last]
	if lo > 1024 {
		spans = append(spans, [2]int{1024, lo - 1})
	}
	if hi < 65535 {
		spans = append(spans, [2]int{hi + 1, 65535})
	}
	total := 0
	for _, s := range spans {
		total += s[1] - s[0] + 1
	}
	if total == 0 {
		return 0, fmt.Errorf("launch: no port outside the ephemeral range %d-%d: %w", lo, hi, ErrBadArgument)
	}
	var last error
	for range 64 {
		k := rand.IntN(total)
		p := 0
		for _, s := range spans {
			if n := s[1] - s[0] + 1; k < n {
				p = s[0] + k
				break
			} else {
				k -= n
			}
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("launch: no free port on %s outside the ephemeral range: %w", host, last)
}
