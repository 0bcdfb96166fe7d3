package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"dovetail/cpu"
	"dovetail/gpu"
	"dovetail/models/draft"
)

// gpuMinHead is the size of LM head (hidden × vocabulary values) from which
// --device auto drafts on a GPU. Each tree level multiplies it: measured on
// an H100 machine's CPU (16 threads) and GPU, a drafting round of the
// embedded model's draft (64 × 4096) took 3.2-3.5 ms on the CPU and
// 6.1-6.3 ms on the GPU, where kernel launches and waits dominate; a
// TinyLlama-1.1B target's (2048 × 32000) took 18.2 ms on the CPU and 5.1
// ms on the GPU.
const gpuMinHead = 1 << 22

// gpuNeed is a rough upper bound of the GPU memory a draft of shape c
// takes with its trainer, in bytes, all float32: the embeddings and LM
// head; the weights of the live versions, the shadow and the kept copy,
// with gradients and AdamW moments (ten copies); and the logits, targets
// and their gradients of a 2048-position training batch.
func gpuNeed(c draft.Config) uint64 {
	v := uint64(c.Vocab)
	return 4 * (2*uint64(c.Hidden)*v + 10*uint64(c.Params()) + 4*2048*v)
}

// draftDevices opens where a DGF draft of shape c runs, as --device names
// it: auto (the first CUDA GPU when there is one and the draft is large
// enough to gain from it, else the CPU), cpu, or cuda[:N]. The drafter and
// the trainer get devices of their own: on a GPU two streams, so that
// training never queues in front of drafting; on the CPU the drafter uses
// the target's threads (they take turns) and the trainer trainerThreads of
// its own. Under auto, a GPU that fails to start (a driver too old for the
// kernels, say) or has too little memory free is reported to warn and the
// CPU used.
func draftDevices(spec string, c draft.Config, pool *cpu.Pool, trainerThreads int, warn io.Writer) (drafter, trainer gpu.Device, err error) {
	host := func() (gpu.Device, gpu.Device, error) {
		return gpu.NewHost(pool.Threads()), gpu.NewHost(trainerThreads), nil
	}
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch kind {
	case "cpu":
		if hasArg {
			return nil, nil, fmt.Errorf("--device %q: cpu takes no number", spec)
		}
		return host()
	case "auto", "cuda":
		if kind == "auto" && !hasArg && c.Hidden*c.Vocab < gpuMinHead {
			return host()
		}
		ordinal := 0
		if hasArg {
			if kind == "auto" {
				return nil, nil, fmt.Errorf("--device %q: auto takes no number", spec)
			}
			if ordinal, err = strconv.Atoi(arg); err != nil || ordinal < 0 {
				return nil, nil, fmt.Errorf("--device %q: %q is not a GPU number", spec, arg)
			}
		}
		d, err := gpu.NewCUDA(ordinal)
		if err == nil {
			var t gpu.Device
			if t, err = gpu.NewCUDA(ordinal); err == nil {
				m, ok := d.(interface{ MemInfo() (free, total uint64) })
				if !ok || kind != "auto" {
					return d, t, nil
				}
				free, _ := m.MemInfo()
				if need := gpuNeed(c); free >= need {
					return d, t, nil
				}
				fmt.Fprintf(warn, "warning: drafting on the CPU: %s has %d MiB free, the draft and its trainer need about %d MiB\n",
					d.Name(), free>>20, gpuNeed(c)>>20)
				return host()
			}
		}
		if kind == "auto" {
			if !errors.Is(err, gpu.ErrNoCUDA) {
				fmt.Fprintf(warn, "warning: drafting on the CPU: the GPU did not start: %v\n", err)
			}
			return host()
		}
		return nil, nil, fmt.Errorf("--device %s: %w", spec, err)
	}
	return nil, nil, fmt.Errorf("--device %q: want auto, cpu or cuda[:N]", spec)
}
