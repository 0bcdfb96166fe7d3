package cuda

import (
	"errors"
	"regexp"
	"testing"
	"time"
)

// A CUDA device reports memory that its buffers take, and Close gives back
// its stream, handle and pinned memory: opening and closing many devices
// leaves the GPU's free memory where it was.
func TestCUDAClose(t *testing.T) {
	d0 := openAnother(t)
	free0, total := d0.MemInfo()
	d0.Close()
	if free0 == 0 || free0 > total {
		t.Fatalf("MemInfo: free %d of %d", free0, total)
	}
	for range 20 {
		d := openAnother(t)
		b := d.Alloc(1 << 24) // 64 MiB
		if free, _ := d.MemInfo(); free > free0-(60<<20) {
			t.Errorf("64 MiB allocated, free memory %d MiB of %d before", free>>20, free0>>20)
		}
		d.Upload(b, []float32{1, 2, 3})
		d.Free(b)
		d.Close()
		d.Close()
	}
	d := openAnother(t)
	defer d.Close()
	if free, _ := d.MemInfo(); free+(64<<20) < free0 {
		t.Errorf("after 20 devices opened and closed: %d MiB free, %d before", free>>20, free0>>20)
	}
}

// The probe names each GPU with its compute capability, memory, bus and
// the copy speeds it measures; without a driver it says there is none.
func TestCUDAProbe(t *testing.T) {
	if _, err := Open(0); errors.Is(err, ErrNoDevice) {
		if _, gpus, perr := Probe(true); !errors.Is(perr, ErrNoDevice) || len(gpus) != 0 {
			t.Errorf("no CUDA, but the probe says %v, %v", gpus, perr)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	v, gpus, err := Probe(true)
	if err != nil || v < 11000 || len(gpus) == 0 {
		t.Fatalf("driver %d, %d GPUs, %v", v, len(gpus), err)
	}
	for _, g := range gpus {
		if g.Name == "" || g.ComputeMajor < 5 || g.FreeBytes == 0 || g.FreeBytes > g.TotalBytes ||
			!regexp.MustCompile(`^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$`).MatchString(g.PCIBusID) {
			t.Errorf("GPU %+v", g)
		}
		if g.H2DGBs < 0.5 || g.D2HGBs < 0.5 || g.Latency <= 0 || g.Latency > time.Millisecond {
			t.Errorf("GPU %d copies: %.1f / %.1f GB/s, latency %v", g.Ordinal, g.H2DGBs, g.D2HGBs, g.Latency)
		}
		t.Logf("%+v", g)
	}
}
