package sysmem

import "testing"

func TestParseMeminfo(t *testing.T) {
	info, err := parseMeminfo([]byte("MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   12288000 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Total != 24576000*1024 || info.Available != 12288000*1024 {
		t.Errorf("parsed %+v", info)
	}
	if _, err := parseMeminfo([]byte("MemTotal: 5 kB\n")); err == nil {
		t.Error("meminfo without MemAvailable accepted")
	}
}

// On this machine: some memory, less available than in all.
func TestRead(t *testing.T) {
	info, err := Read()
	if err != nil {
		t.Skip(err) // not Linux
	}
	if info.Total == 0 || info.Available == 0 || info.Available > info.Total {
		t.Errorf("read %+v", info)
	}
}

// A cgroup's limit caps what the machine's memory says: v2 (a container
// limited to 8 GiB of a 64 GB machine, 2 GiB of it used) and v1; without
// one the machine's own numbers stand.
func TestReadFromRecorded(t *testing.T) {
	for _, c := range []struct {
		root             string
		total, available uint64
		limited          bool
	}{
		{"testdata/container", 8 << 30, 6 << 30, true},
		{"testdata/v1", 4 << 30, 3 << 30, true},
		{"testdata/bare", 16384000 * 1024, 12000000 * 1024, false},
	} {
		info, err := ReadFrom(c.root)
		if err != nil {
			t.Fatal(err)
		}
		if info.Total != c.total || info.Available != c.available || info.Limited != c.limited {
			t.Errorf("%s: %+v, want total %d available %d limited %v", c.root, info, c.total, c.available, c.limited)
		}
	}
}
