package gpu

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"dovetail/internal/golden"
	"dovetail/models"
	"dovetail/models/draft"
)

// The host device counts what it holds: buffers until freed (views are
// not extra memory), and reports the machine's memory.
func TestHostHeld(t *testing.T) {
	h := newHost[float32](1)
	a := h.Alloc(1000)
	b := h.Alloc(24)
	v := h.View(a, 10, 100)
	if got := h.Held(); got != 4*1024 {
		t.Fatalf("held %d bytes after two buffers of 1000 and 24 floats", got)
	}
	h.Free(v) // a view: frees nothing
	h.Free(a)
	h.Free(a) // twice: counted once
	if got := h.Held(); got != 4*24 {
		t.Fatalf("held %d bytes after freeing 1000 floats", got)
	}
	h.Free(b)
	if free, total := h.MemInfo(); total > 0 && (free == 0 || free > total) {
		t.Errorf("MemInfo: free %d of %d", free, total)
	}
	h.Close()
}

// A CUDA device reports memory that its buffers take, and Close gives back
// its stream, handle and pinned memory: opening and closing many devices
// leaves the GPU's free memory where it was.
func TestCUDAClose(t *testing.T) {
	cudaOrSkip(t)
	d0, err := NewCUDA(0)
	if err != nil {
		t.Fatal(err)
	}
	free0, total := d0.MemInfo()
	d0.Close()
	if free0 == 0 || free0 > total {
		t.Fatalf("MemInfo: free %d of %d", free0, total)
	}
	for range 20 {
		d, err := NewCUDA(0)
		if err != nil {
			t.Fatal(err)
		}
		b := d.Alloc(1 << 24) // 64 MiB
		if free, _ := d.MemInfo(); free > free0-(60<<20) {
			t.Errorf("64 MiB allocated, free memory %d MiB of %d before", free>>20, free0>>20)
		}
		d.Upload(b, []float32{1, 2, 3})
		d.Free(b)
		d.Close()
		d.Close()
	}
	d, err := NewCUDA(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if free, _ := d.MemInfo(); free+(64<<20) < free0 {
		t.Errorf("after 20 devices opened and closed: %d MiB free, %d before", free>>20, free0>>20)
	}
}

// Measure counts, to the byte, what the host devices hold for a draft
// drafting in two sequences and a learner that published once: on models
// whose frozen matrices the host keeps as they are (f32) and dequantizes
// (Q8_0, small), and with the draft's matrices counted as large ones
// (quantized for drafting, their float32 values dropped).
func TestMeasureMatchesHost(t *testing.T) {
	for _, large := range []bool{false, true} {
		t.Run(fmt.Sprint("large=", large), func(t *testing.T) {
			if large {
				largeOnly(t, 1024)
			}
			measureMatchesHost(t)
		})
	}
}

func measureMatchesHost(t *testing.T) {
	for _, name := range []string{"stories260K-f32.gguf", "stories260K-Q8_0-mixed.gguf"} {
		m, err := models.LoadLlama(golden.ModelPath(name))
		if err != nil {
			t.Fatal(err)
		}
		c := draft.ForTarget(m.Config, 2, 0)
		learn := &Learn{Config: DefaultTrainConfig(), MaxRows: 96, MaxLen: 48, EvalDepth: 4}
		want, err := Measure(c, m, false, 100, 2, learn, false)
		if err != nil {
			t.Fatal(err)
		}
		dd, td := newHost[float32](1), newHost[float32](1)
		d, err := NewDraft(dd, c, m)
		if err != nil {
			t.Fatal(err)
		}
		d.InitDayZero(1)
		if err := d.FreezeForDrafting(); err != nil {
			t.Fatal(err)
		}
		live := NewLive(d, 0)
		s1, s2 := live.NewSequence(100), live.NewSequence(100)
		live.DropFloat()
		lr := NewLearner(live, td, learn.Config, learn.MaxRows, learn.MaxLen, learn.EvalDepth)
		// Nothing is on the training device before the learner is used.
		if td.Held() != 0 || lr.SetUp() {
			t.Errorf("%s: a learner not yet used holds %d bytes (set up: %v)", name, td.Held(), lr.SetUp())
		}
		if _, err := lr.Publish(true); err != nil {
			t.Fatal(err)
		}
		if dd.Held() != want.Draft || td.Held() != want.Trainer {
			t.Errorf("%s: held %d and %d bytes, measured %d and %d", name, dd.Held(), td.Held(), want.Draft, want.Trainer)
		}
		if want.Draft == 0 || want.Trainer <= want.Draft/2 {
			t.Errorf("%s: implausible footprint %+v", name, want)
		}
		s1.Free()
		s2.Free()
		lr.Free()
		live.Close()
		m.Close()
	}
}

// The probe names each GPU with its compute capability, memory, bus and
// the copy speeds it measures; without a driver it says there is none.
func TestCUDAProbe(t *testing.T) {
	if _, err := NewCUDA(0); errors.Is(err, ErrNoCUDA) {
		if _, gpus, perr := ProbeCUDA(true); !errors.Is(perr, ErrNoCUDA) || len(gpus) != 0 {
			t.Errorf("no CUDA, but the probe says %v, %v", gpus, perr)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	v, gpus, err := ProbeCUDA(true)
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
