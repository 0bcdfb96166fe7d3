package runner

import (
	"testing"

	"dovetail/app/runner/probe"
)

// A model's size says where it would run: in memory, with layers on the
// GPU when memory alone is short, or nowhere.
func TestFitBySize(t *testing.T) {
	const gib = 1 << 30
	cpuOnly := probe.Report{Memory: probe.Memory{AvailableBytes: 4 * gib}}
	withGPU := cpuOnly
	withGPU.GPUs = []probe.GPU{{Name: "GPU", VRAMFreeBytes: 8 * gib}}
	for _, c := range []struct {
		size    uint64
		machine probe.Report
		want    string
	}{
		{400 << 20, cpuOnly, FitsCPU},
		{4 * gib, cpuOnly, NoFit},
		{4 * gib, withGPU, FitsPartly},
		{400 << 20, withGPU, FitsCPU},
		{40 * gib, withGPU, NoFit},
	} {
		if got := FitBySize(c.size, c.machine); got.Verdict != c.want || got.Reason == "" {
			t.Errorf("%d bytes, %d GPUs: %+v, want %s", c.size, len(c.machine.GPUs), got, c.want)
		}
	}
}
