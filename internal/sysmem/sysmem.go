// Package sysmem reads how much memory this machine has and how much of it
// a new allocation can still get: /proc/meminfo, capped by the cgroup the
// process runs in (a container's limit is what it really has).
package sysmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Info is the machine's memory in bytes.
type Info struct {
	Total     uint64 // physical memory, or the cgroup's limit when lower
	Available uint64 // what new allocations can get without swapping
	// Limited says a cgroup limit is below the physical memory.
	Limited bool
}

// Read reads the memory of this machine as this process sees it.
func Read() (Info, error) { return ReadFrom("/") }

// ReadFrom reads /proc and /sys under root instead of the machine's own:
// a recorded machine's files (tests).
func ReadFrom(root string) (Info, error) {
	data, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return Info{}, fmt.Errorf("memory: %w", err)
	}
	info, err := parseMeminfo(data)
	if err != nil {
		return Info{}, err
	}
	if limit, used, ok := cgroupLimit(root); ok && limit < info.Total {
		info.Total, info.Limited = limit, true
		if free := limit - min(used, limit); free < info.Available {
			info.Available = free
		}
	}
	return info, nil
}

// parseMeminfo reads MemTotal and MemAvailable (kB) from /proc/meminfo.
func parseMeminfo(data []byte) (Info, error) {
	var info Info
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		switch key {
		case "MemTotal":
			info.Total, haveTotal = v, true
		case "MemAvailable":
			info.Available, haveAvail = v, true
		}
	}
	if !haveTotal || !haveAvail {
		return Info{}, errors.New("memory: /proc/meminfo has no MemTotal or MemAvailable")
	}
	return info, nil
}

// cgroupLimit is the memory limit of this process's cgroup and what it
// uses now: cgroup v2's memory.max and memory.current, else v1's
// limit_in_bytes and usage_in_bytes. ok is false when there is no limit.
func cgroupLimit(root string) (limit, used uint64, ok bool) {
	v2, v1 := "/sys/fs/cgroup", "/sys/fs/cgroup/memory"
	if p, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		for _, line := range strings.Split(string(p), "\n") {
			// "0::/path" (v2), "N:memory:/path" (v1)
			f := strings.SplitN(line, ":", 3)
			switch {
			case len(f) < 3:
			case f[0] == "0" && f[1] == "":
				v2 += strings.TrimSpace(f[2])
			case f[1] == "memory":
				v1 += strings.TrimSpace(f[2])
			}
		}
	}
	for _, pair := range [][2]string{
		{v2 + "/memory.max", v2 + "/memory.current"},
		{v1 + "/memory.limit_in_bytes", v1 + "/memory.usage_in_bytes"},
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	} {
		l, err := readUint(filepath.Join(root, pair[0]))
		if err != nil {
			continue
		}
		u, _ := readUint(filepath.Join(root, pair[1]))
		// v1 writes a huge number for "no limit".
		return l, u, l < 1<<60
	}
	return 0, 0, false
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 1 << 62, nil
	}
	return strconv.ParseUint(s, 10, 64)
}
