// Package cudatest opens the CUDA device for the tests of code that runs
// on one (the draft, its training, the target's layers), skipping them
// where there is none.
package cudatest

import (
	"errors"
	"sync"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda"
)

// cudaShared is opened once per test binary: a CUDA context costs far more
// to create than any test here takes.
var cudaShared struct {
	once sync.Once
	dev  device.Device
	err  error
}

// Device is CUDA device 0, or a skip where there is none.
func Device(t testing.TB) device.Device {
	t.Helper()
	cudaShared.once.Do(func() { cudaShared.dev, cudaShared.err = cuda.Open(0) })
	switch {
	case errors.Is(cudaShared.err, cuda.ErrNoDevice):
		t.Skipf("no CUDA device: %v", cudaShared.err)
	case cudaShared.err != nil:
		t.Fatal(cudaShared.err)
	}
	return cudaShared.dev
}
