//go:build linux

package sim

import (
	"io/fs"
	"testing"
)

// fakeFiles is a file system of made-up /proc and /sys files.
type fakeFiles map[string]string

func (f fakeFiles) read(name string) ([]byte, error) {
	s, ok := f[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(s), nil
}

const gib = 1 << 30

// TestProbeTakesTheLeast: the probe takes the least of the cgroups' room
// (limit minus usage less inactive page cache, over the process's cgroup
// and its ancestors, v2 and v1), MemAvailable and what RLIMIT_AS leaves
// beyond the process's size; unlimited and unreadable sources count for
// nothing.
func TestProbeTakesTheLeast(t *testing.T) {
	meminfo := "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   20971520 kB\n" // 20 GiB
	noRlimit := func() (uint64, bool) { return 0, false }
	cases := []struct {
		name   string
		files  fakeFiles
		rlimit func() (uint64, bool)
		want   uint64
		ok     bool
	}{
		{"nothing readable", fakeFiles{}, noRlimit, 0, false},
		{"meminfo only", fakeFiles{"/proc/meminfo": meminfo}, noRlimit, 20 * gib, true},
		{"v2 limit of an ancestor", fakeFiles{
			"/proc/meminfo":                     meminfo,
			"/proc/self/cgroup":                 "0::/a/b\n",
			"/sys/fs/cgroup/a/b/memory.max":     "max\n",
			"/sys/fs/cgroup/a/memory.max":       "8589934592\n", // 8 GiB
			"/sys/fs/cgroup/a/memory.current":   "3221225472\n", // 3 GiB
			"/sys/fs/cgroup/a/memory.stat":      "anon 1\ninactive_file 1073741824\n",
			"/sys/fs/cgroup/a/b/memory.stat":    "inactive_file 0\n",
			"/sys/fs/cgroup/a/b/memory.current": "0\n",
		}, noRlimit, 6 * gib, true},
		{"v2 container root", fakeFiles{
			"/proc/meminfo":                 meminfo,
			"/proc/self/cgroup":             "0::/\n",
			"/sys/fs/cgroup/memory.max":     "4294967296\n",
			"/sys/fs/cgroup/memory.current": "5368709120\n",
		}, noRlimit, 0, true},
		{"v1 limit, unlimited parent", fakeFiles{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "4:memory:/job\n3:cpu,cpuacct:/job\n0::/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":     "9223372036854771712\n",
			"/sys/fs/cgroup/memory/job/memory.limit_in_bytes": "10737418240\n", // 10 GiB
			"/sys/fs/cgroup/memory/job/memory.usage_in_bytes": "2147483648\n",  // 2 GiB
			"/sys/fs/cgroup/memory/job/memory.stat":           "inactive_file 99\ntotal_inactive_file 1073741824\n",
		}, noRlimit, 9 * gib, true},
		{"address space", fakeFiles{
			"/proc/meminfo":    meminfo,
			"/proc/self/statm": "262144 1000 10 10 0 10 0\n", // 1 GiB of 4 KiB pages
		}, func() (uint64, bool) { return 8 * gib, true }, 7 * gib, true},
		{"address space already used up", fakeFiles{
			"/proc/self/statm": "4194304 1 1 1 0 1 0\n", // 16 GiB
		}, func() (uint64, bool) { return 8 * gib, true }, 0, true},
	}
	for _, c := range cases {
		p := probe{read: c.files.read, rlimitAS: c.rlimit, pageSize: 4096}
		got, ok := p.available()
		if got != c.want || ok != c.ok {
			t.Errorf("%s: available() = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestBudgetLeavesHeadroom: the sim takes what is available less an
// eighth (at least minHeadroom), or half of very little.
func TestBudgetLeavesHeadroom(t *testing.T) {
	for _, c := range []struct{ avail, want uint64 }{
		{16 * gib, 14 * gib},
		{1 * gib, 1*gib - minHeadroom},
		{300 << 20, 150 << 20},
		{0, 0},
	} {
		if got := budgetFrom(c.avail); got != c.want {
			t.Errorf("budgetFrom(%d) = %d, want %d", c.avail, got, c.want)
		}
	}
}
