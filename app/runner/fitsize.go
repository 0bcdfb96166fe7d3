package runner

import (
	"fmt"

	"dovetail/app/runner/probe"
)

// SizeFit is how a model not downloaded yet would fit this machine, from
// its file's size alone: what a list of models to get shows beside each.
type SizeFit struct {
	Verdict string // FitsCPU (in memory), FitsPartly (layers on the GPU) or NoFit
	Reason  string
}

// sizeOverhead is what a model needs beside its weights in a short
// context, as PlanFit counts it for the small models a catalogue offers:
// the cache of a few thousand positions, the scratch and the draft.
const sizeOverhead = 512 << 20

// FitBySize says where a model of fileBytes would run on machine, as
// PlanFit would place it once opened: in memory on the CPU, with its last
// layers on the first GPU where memory alone is not enough (or where the
// GPU is there to take them), or not at all.
func FitBySize(fileBytes uint64, machine probe.Report) SizeFit {
	need := fileBytes + fileBytes/10 + sizeOverhead
	avail := machine.Memory.AvailableBytes
	var gpu uint64
	name := ""
	if len(machine.GPUs) > 0 {
		g := machine.GPUs[0]
		name = g.Name
		if g.VRAMFreeBytes > gpuReserve {
			gpu = g.VRAMFreeBytes - gpuReserve
		}
	}
	switch {
	case avail == 0 || need <= avail:
		if gpu > 0 {
			return SizeFit{FitsCPU, fmt.Sprintf("needs about %s of the %s free; some layers may go on %s", HumanBytes(need), HumanBytes(avail), name)}
		}
		return SizeFit{FitsCPU, fmt.Sprintf("needs about %s of the %s free", HumanBytes(need), HumanBytes(avail))}
	case need <= avail+gpu:
		return SizeFit{FitsPartly, fmt.Sprintf("needs about %s: %s here, the rest of its layers on %s", HumanBytes(need), HumanBytes(avail), name)}
	}
	return SizeFit{NoFit, fmt.Sprintf("needs about %s; memory and GPU have %s free together", HumanBytes(need), HumanBytes(avail+gpu))}
}
