// Package cudatest opens the CUDA device for the tests of code that runs
// on one (the draft, its training, the target's layers): GPU 0 where
// there is one, else the emulator (cudaemu: the same kernels, run on the
// CPU), else a skip.
package cudatest

import (
	"errors"
	"sync"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/device/cuda/cudaemu"
)

// cudaShared is opened once per test binary: a CUDA context costs far more
// to create than any test here takes.
var cudaShared struct {
	once     sync.Once
	dev      device.Device
	err      error
	lib      string // the driver library dev was opened with
	emulated bool
}

func open() {
	cudaShared.once.Do(func() {
		s := &cudaShared
		s.dev, s.lib, s.emulated, s.err = cudaemu.Open(cuda.DriverPath(), cuda.KernelSources(), cuda.ErrNoDevice,
			func(lib string) (device.Device, error) { return cuda.OpenDriver(lib, 0) })
	})
}

// Device is CUDA device 0, or where there is none the emulator, or a skip
// where that cannot be built either (no C++ compiler, or
// DOVETAIL_CUDAEMU=off). Benchmarks skip on the emulator: its timings
// mean nothing.
func Device(t testing.TB) device.Device {
	t.Helper()
	open()
	switch {
	case errors.Is(cudaShared.err, cuda.ErrNoDevice):
		t.Skipf("no CUDA device: %v", cudaShared.err)
	case cudaShared.err != nil:
		t.Fatal(cudaShared.err)
	}
	if _, bench := t.(*testing.B); bench && cudaShared.emulated {
		t.Skip("no CUDA device: benchmarks do not run on the emulator")
	}
	return cudaShared.dev
}

// Open opens another device (a stream of its own, closed by the caller) on
// Device's GPU or emulator; the error wraps cuda.ErrNoDevice where there is
// neither.
func Open() (device.Device, error) {
	open()
	if cudaShared.err != nil {
		return nil, cudaShared.err
	}
	return cuda.OpenDriver(cudaShared.lib, 0)
}

// Driver points the code t runs that opens CUDA itself (cuda.Open: the
// runner's --gpu-layers) at Device's GPU or emulator, for t's duration;
// false where there is neither.
func Driver(t *testing.T) bool {
	open()
	if cudaShared.err != nil {
		return false
	}
	t.Setenv("DOVETAIL_LIBCUDA", cudaShared.lib)
	return true
}

// Emulated reports whether Device is the emulator: tests whose size only
// a GPU makes quick run smaller there.
func Emulated() bool {
	open()
	return cudaShared.emulated
}
