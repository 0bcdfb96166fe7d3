package probe

import (
	"math"
	"testing"

	"dovetail/device/cuda"
)

// The bandwidth from the driver's attributes matches the cards' data
// sheets: an RTX 2080 SUPER (7,751 MHz, 256 bits) 496 GB/s, an H100 SXM
// (2,619 MHz HBM3, 5,120 bits) 3.35 TB/s; nothing where the driver said
// nothing.
func TestMemoryBandwidth(t *testing.T) {
	for _, c := range []struct {
		clock, bus int
		want       float64
	}{{7751000, 256, 496.064e9}, {2619000, 5120, 3352.32e9}, {7000000, 256, 448e9}, {0, 256, 0}, {7751000, 0, 0}, {-1, 256, 0}} {
		if got := MemoryBandwidth(c.clock, c.bus); math.Abs(got-c.want) > 1e3 {
			t.Errorf("MemoryBandwidth(%d kHz, %d bits) = %.6g B/s, want %.6g", c.clock, c.bus, got, c.want)
		}
	}
}

// The probe's report carries the driver's attributes and the bandwidth
// reckoned from them.
func TestFromInfoBandwidth(t *testing.T) {
	g := fromInfo(cuda.Info{Name: "card", MemoryClockKHz: 7000000, MemoryBusBits: 256}, t.TempDir())
	if g.MemoryBandwidthGBs != 448 || g.MemoryClockKHz != 7000000 || g.MemoryBusBits != 256 {
		t.Errorf("fromInfo: %+v, want 448 GB/s from 7,000 MHz and 256 bits", g)
	}
	if g := fromInfo(cuda.Info{Name: "card"}, t.TempDir()); g.MemoryBandwidthGBs != 0 {
		t.Errorf("fromInfo without the attributes: %v GB/s, want 0", g.MemoryBandwidthGBs)
	}
}
