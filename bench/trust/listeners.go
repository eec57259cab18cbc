package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// target is a listening socket of a rank, as the harness dials it:
// network "tcp" or "unix"/"unixpacket" (an abstract name starts with '@').
type target struct {
	network, addr string
}

func (t target) String() string { return t.network + " " + t.addr }

// listeners is every listening socket process pid holds: the sockets among
// its file descriptors that /proc/net/tcp, tcp6 and unix list as
// listening.
func listeners(pid int) ([]target, error) {
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	socks, err := tcpListening()
	if err != nil {
		return nil, err
	}
	var out []target
	for _, s := range socks {
		if inodes[s.inode] {
			out = append(out, s.target)
		}
	}
	us, err := unixListeners(inodes)
	if err != nil {
		return nil, err
	}
	return append(out, us...), nil
}

// socketInodes is the inodes of pid's sockets.
func socketInodes(pid int) (map[string]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	inodes := make(map[string]bool)
	for _, e := range ents {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue // closed meanwhile
		}
		if in, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	return inodes, nil
}

// listening is a listening TCP socket of this network namespace and its
// inode, whoever holds it.
type listening struct {
	target
	inode string
}

// tcpListening is every listening TCP socket in /proc/net/tcp and tcp6.
func tcpListening() ([]listening, error) {
	var out []listening
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		ls, err := tcpListeningIn(file)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// tcpListeningIn parses a /proc/net/tcp-style file for listening sockets
// (state 0A).
func tcpListeningIn(file string) ([]listening, error) {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []listening
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" {
			continue
		}
		addr, err := procAddr(fs[1])
		if err != nil {
			return nil, fmt.Errorf("trust: %s: %w", file, err)
		}
		out = append(out, listening{target{"tcp", addr}, fs[9]})
	}
	return out, sc.Err()
}

// procAddr turns /proc/net/tcp's "0100007F:1F90" (each 32-bit word of the
// address in host order, little-endian here) into a dialable "host:port";
// an unspecified address becomes loopback.
func procAddr(s string) (string, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return "", fmt.Errorf("bad port %q", s)
	}
	ip := net.IP(raw)
	if ip.IsUnspecified() {
		if len(raw) == 4 {
			ip = net.IPv4(127, 0, 0, 1)
		} else {
			ip = net.IPv6loopback
		}
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}

// unixListeners parses /proc/net/unix for listening sockets (flag
// __SO_ACCEPTCON, 0x10000) among inodes that have a name.
func unixListeners(inodes map[string]bool) ([]target, error) {
	return unixListening(func(inode, _ string) bool { return inodes[inode] })
}

// unixNamed is every listening unix socket whose name starts with prefix,
// whoever holds it: one read of /proc/net/unix, cheap enough to poll
// often for a socket that lives only while a group forms.
func unixNamed(prefix string) ([]target, error) {
	return unixListening(func(_, name string) bool { return strings.HasPrefix(name, prefix) })
}

// unixListening is the listening unix sockets of /proc/net/unix that keep
// accepts, by inode and name.
func unixListening(keep func(inode, name string) bool) ([]target, error) {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []target
	sc := bufio.NewScanner(f)
	sc.Scan()
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || !keep(fs[6], fs[7]) {
			continue
		}
		flags, err := strconv.ParseUint(fs[3], 16, 32)
		if err != nil || flags&0x10000 == 0 {
			continue
		}
		network := map[string]string{"0001": "unix", "0005": "unixpacket"}[fs[4]]
		if network == "" {
			continue
		}
		out = append(out, target{network, fs[7]})
	}
	return out, sc.Err()
}
