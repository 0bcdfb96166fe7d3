package runner

import (
	"errors"
	"fmt"

	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/models/draft"
)

// gpuMinHead is the size of LM head (hidden × vocabulary values) from which
// device auto drafts on a GPU: each tree level multiplies it, and below
// this size a CPU round is as fast as a GPU's, whose kernel launches and
// waits dominate (docs/measurements/gpu.md, "The draft on a GPU").
const gpuMinHead = 1 << 22

// draftDevices are where a DGF draft drafts and trains: on a GPU, two
// streams of their own, so that training never queues in front of
// drafting; on the CPU, host devices of their own threads.
type draftDevices struct {
	drafter, trainer device.Device // trainer nil: no adaptation
}

func (d draftDevices) close() {
	if d.drafter != nil {
		d.drafter.Close()
	}
	if d.trainer != nil {
		d.trainer.Close()
	}
}

// openGPU opens the GPU c names for a draft: under auto the first one,
// or nil when there is none (a notice when one failed to start); under
// cuda[:N] that one, or an error; under cpu none.
func openGPU(c DeviceChoice, notify func(Notice)) (device.Device, error) {
	if c.Kind == DeviceCPU {
		return nil, nil
	}
	d, err := cuda.Open(c.Ordinal)
	switch {
	case err == nil:
		return d, nil
	case c.Kind == DeviceCUDA:
		return nil, fmt.Errorf("device %s: %w", c, err)
	case !errors.Is(err, cuda.ErrNoDevice):
		notify(Notice{Warning: true, Text: fmt.Sprintf("drafting on the CPU: the GPU did not start: %v", err)})
	}
	return nil, nil
}

// TrainDevice opens where a draft of shape c trains offline (distill): as
// where says, auto choosing a CUDA GPU when there is one and the draft is
// large enough to gain from it; on the CPU with threads threads.
func TrainDevice(where DeviceChoice, c draft.Config, threads int, notify func(Notice)) (device.Device, error) {
	if where.Kind == DeviceCPU || where.Kind == DeviceAuto && c.Hidden*c.Vocab < gpuMinHead {
		return device.NewHost(threads), nil
	}
	d, err := openGPU(where, notify)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return device.NewHost(threads), nil
	}
	return d, nil
}
