package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// errCannotRun is wrapped by preflight's answer: this machine or user
// cannot make network namespaces, so the harness skips.
var errCannotRun = errors.New("hosts: cannot run here")

// tools are the programs the harness runs: ip and tc (iproute2) make and
// shape the hosts, unshare and hostname (util-linux, hostname) give each
// rank its host's name.
var tools = []string{"ip", "tc", "unshare", "hostname"}

// preflight says why the harness cannot run here, or nil: it needs Linux,
// root (network namespaces, veth pairs and qdiscs need CAP_NET_ADMIN and
// CAP_SYS_ADMIN) and the tools.
func preflight() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: network namespaces are Linux's (this is %s)", errCannotRun, runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: it runs as root (making network namespaces, veth pairs and qdiscs needs it); this is uid %d",
			errCannotRun, os.Geteuid())
	}
	var missing []string
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not found in PATH (iproute2, util-linux and hostname provide them)", errCannotRun, strings.Join(missing, ", "))
	}
	if _, err := output("ip", "netns", "list"); err != nil {
		return fmt.Errorf("%w: %w", errCannotRun, err)
	}
	return nil
}
