package shm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The variables CHOREO_SHM_SLOT_SIZE and CHOREO_SHM_SLOTS override
// Config.SlotSize and Config.Slots, so that runs can compare ring
// geometries without a rebuild.
const (
	envSlotSize = "CHOREO_SHM_SLOT_SIZE"
	envSlots    = "CHOREO_SHM_SLOTS"
)

// intFromEnv returns the count the variable name holds (a suffix K or M,
// either case, with or without "iB" or "B", multiplies by 1<<10 or 1<<20),
// or def when it is unset.
func intFromEnv(name string, def int) (int, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	s, mul := strings.ToUpper(v), 1
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	switch {
	case strings.HasSuffix(s, "K"):
		s, mul = s[:len(s)-1], 1<<10
	case strings.HasSuffix(s, "M"):
		s, mul = s[:len(s)-1], 1<<20
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > (1<<40)/mul {
		return def, fmt.Errorf("%s=%q: want a positive count", name, v)
	}
	return n * mul, nil
}

func (c *Config) ringFromEnv() error {
	var err error
	if c.SlotSize, err = intFromEnv(envSlotSize, c.SlotSize); err != nil {
		return err
	}
	c.Slots, err = intFromEnv(envSlots, c.Slots)
	return err
}
