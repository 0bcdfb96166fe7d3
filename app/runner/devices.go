package runner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"dovetail/gpu"
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

// draftDevices are where a DGF draft drafts and trains.
type draftDevices struct {
	drafter, trainer gpu.Device
	onGPU            bool
}

func (d draftDevices) close() {
	if d.drafter != nil {
		d.drafter.Close()
	}
	if d.trainer != nil {
		d.trainer.Close()
	}
}

// openDraftDevices opens where a DGF draft of shape c runs, as spec says:
// auto (the first CUDA GPU when there is one, the draft is large enough to
// gain from it, and need(true) fits in its free memory; else the CPU),
// cpu, or cuda[:N]. The drafter and the trainer get devices of their own:
// on a GPU two streams, so that training never queues in front of
// drafting; on the CPU the drafter uses draftThreads (the target's: they
// take turns) and the trainer trainerThreads of its own. Under auto, a GPU
// that fails to start or has too little memory is a notice, and the CPU
// is used.
func openDraftDevices(spec string, c draft.Config, draftThreads, trainerThreads int, need func(onGPU bool) uint64, notify func(Notice)) (draftDevices, error) {
	host := draftDevices{drafter: gpu.NewHost(draftThreads), trainer: gpu.NewHost(trainerThreads)}
	kind, ordinal, err := parseDevice(spec)
	if err != nil {
		return draftDevices{}, err
	}
	if kind == "cpu" || kind == "auto" && c.Hidden*c.Vocab < gpuMinHead {
		return host, nil
	}
	d, err := gpu.NewCUDA(ordinal)
	var t gpu.Device
	if err == nil {
		if t, err = gpu.NewCUDA(ordinal); err != nil {
			d.Close()
		}
	}
	if err != nil {
		if kind == "cuda" {
			return draftDevices{}, fmt.Errorf("device %s: %w", spec, err)
		}
		if !errors.Is(err, gpu.ErrNoCUDA) {
			notify(Notice{Warning: true, Text: fmt.Sprintf("drafting on the CPU: the GPU did not start: %v", err)})
		}
		return host, nil
	}
	free, _ := d.MemInfo()
	if n := need(true); kind == "auto" && free < n {
		notify(Notice{Warning: true, Text: fmt.Sprintf("drafting on the CPU: %s has %d MiB free, the draft and its trainer need %d MiB",
			d.Name(), free>>20, n>>20)})
		d.Close()
		t.Close()
		return host, nil
	}
	return draftDevices{drafter: d, trainer: t, onGPU: true}, nil
}

// TrainDevice opens where a draft of shape c trains offline (distill): as
// spec says, auto choosing a CUDA GPU when there is one and the draft is
// large enough to gain from it; on the CPU with threads threads.
func TrainDevice(spec string, c draft.Config, threads int, notify func(Notice)) (gpu.Device, error) {
	devs, err := openDraftDevices(spec, c, threads, 1, func(bool) uint64 { return 0 }, notify)
	if err != nil {
		return nil, err
	}
	devs.trainer.Close()
	return devs.drafter, nil
}
