package runner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/models/draft"
)

// gpuMinHead is the size of LM head (hidden × vocabulary values) from which
// device auto drafts on a GPU: each tree level multiplies it, and below
// this size a CPU round is as fast as a GPU's, whose kernel launches and
// waits dominate (docs/measurements, "The draft on a GPU").
const gpuMinHead = 1 << 22

// parseDevice reads auto, cpu or cuda[:N].
func parseDevice(spec string) (kind string, ordinal int, err error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch kind {
	case "", "auto":
		if hasArg {
			return "", 0, fmt.Errorf("device %q: auto takes no number", spec)
		}
		return "auto", 0, nil
	case "cpu":
		if hasArg {
			return "", 0, fmt.Errorf("device %q: cpu takes no number", spec)
		}
		return "cpu", 0, nil
	case "cuda":
		if hasArg {
			if ordinal, err = strconv.Atoi(arg); err != nil || ordinal < 0 {
				return "", 0, fmt.Errorf("device %q: %q is not a GPU number", spec, arg)
			}
		}
		return "cuda", ordinal, nil
	}
	return "", 0, fmt.Errorf("device %q: want auto, cpu or cuda[:N]", spec)
}

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

// openGPU opens the GPU spec names for a draft: under auto the first one,
// or nil when there is none (a notice when one failed to start); under
// cuda[:N] that one, or an error; under cpu none.
func openGPU(spec string, notify func(Notice)) (device.Device, error) {
	kind, ordinal, err := parseDevice(spec)
	if err != nil || kind == "cpu" {
		return nil, err
	}
	d, err := cuda.Open(ordinal)
	switch {
	case err == nil:
		return d, nil
	case kind == "cuda":
		return nil, fmt.Errorf("device %s: %w", spec, err)
	case !errors.Is(err, cuda.ErrNoDevice):
		notify(Notice{Warning: true, Text: fmt.Sprintf("drafting on the CPU: the GPU did not start: %v", err)})
	}
	return nil, nil
}

// TrainDevice opens where a draft of shape c trains offline (distill): as
// spec says, auto choosing a CUDA GPU when there is one and the draft is
// large enough to gain from it; on the CPU with threads threads.
func TrainDevice(spec string, c draft.Config, threads int, notify func(Notice)) (device.Device, error) {
	kind, _, err := parseDevice(spec)
	if err != nil {
		return nil, err
	}
	if kind == "cpu" || kind == "auto" && c.Hidden*c.Vocab < gpuMinHead {
		return device.NewHost(threads), nil
	}
	d, err := openGPU(spec, notify)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return device.NewHost(threads), nil
	}
	return d, nil
}
