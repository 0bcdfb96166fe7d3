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
