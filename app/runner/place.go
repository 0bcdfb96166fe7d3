package runner

import (
	"fmt"

	"dovetail/device"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/train"
)

// gpuRoom is a GPU a draft may go to: its name and free memory.
type gpuRoom struct {
	name string
	free uint64
}

// draftPlace is where a DGF draft drafts and trains, and the budget with
// them placed.
type draftPlace struct {
	draftGPU, trainGPU, learn bool
	budget                    Budget
}

// draftRequest is what a placement of a draft is asked for.
type draftRequest struct {
	base  Budget // the target's
	cfg   draft.Config
	m     *models.Llama
	embd  *models.Tensor // the draft's own embeddings (an EAGLE checkpoint's; nil: the target's)
	ctx   int
	seqs  int
	learn *train.Learn // nil: the draft does not adapt
	// hostBytes is what adaptation holds in host memory besides the
	// trainer (the record ring, the text memory).
	hostBytes uint64
	room      *gpuRoom // nil: no GPU
	// onGPU and onCPU restrict the draft to one side (--device cuda|cpu).
	onGPU, onCPU bool
	// needLearn: a draft that does not learn is no use (a new one).
	needLearn bool
	// layers is what the target's layers will ask of the GPU after the
	// draft (nil: none go there).
	layers *layerAsk
}

// placeDraft puts a draft where it fits best: drafting on the GPU before
// the CPU (a round there is far cheaper for a large draft), and learning
// before not learning. On the GPU the draft goes first, with gpuReserve
// beside it; the target's layers (q.layers) come next, and the trainer
// goes beside them only in the room they leave, else to the CPU. ok is
// false when no place fits.
func placeDraft(q draftRequest) (draftPlace, bool, error) {
	large := q.cfg.Hidden*q.cfg.Vocab >= gpuMinHead
	var tries []draftPlace
	if q.room != nil && (large || q.onGPU) && !q.onCPU {
		tries = append(tries, draftPlace{draftGPU: true, trainGPU: true, learn: true},
			draftPlace{draftGPU: true, learn: true}, draftPlace{draftGPU: true})
	}
	if !q.onGPU {
		tries = append(tries, draftPlace{learn: true}, draftPlace{})
	}
	for _, t := range tries {
		if (t.learn && q.learn == nil) || (!t.learn && q.needLearn) {
			continue
		}
		var l *train.Learn
		if t.learn {
			l = q.learn
		}
		fp, err := train.MeasureEmbedding(q.cfg, q.m, q.embd, q.ctx, q.seqs, l, device.NewCounter(t.draftGPU), device.NewCounter(t.trainGPU))
		if err != nil {
			return draftPlace{}, false, err
		}
		b := q.base
		if q.room != nil {
			b.GPUFree = q.room.free
		}
		b.add("draft", side(t.draftGPU, q.room), fp.Draft)
		var layers uint64 // what the layers take before a trainer on the GPU
		if t.trainGPU {
			layers = q.layers.bytes(gpuAvail(q.room.free, b))
		}
		if t.learn {
			b.add("trainer", side(t.trainGPU, q.room), fp.Trainer)
			b.add("adaptation", "cpu", q.hostBytes)
		}
		if b.fits() && (b.GPU() == 0 || satAdd(satAdd(b.GPU(), layers), gpuReserve) <= q.room.free) {
			t.budget = b
			return t, true, nil
		}
	}
	return draftPlace{}, false, nil
}

// placeOnDevices places a draft as placeDraft does, with the GPU opened
// first where it may take one (a draft large enough to gain, or --device
// cuda; not under onCPU), and q.room set from it; it returns the GPU when
// the place uses it or may (openPlaced closes it otherwise), nil when
// none was opened or the draft fits nowhere.
func (r *Runner) placeOnDevices(q *draftRequest) (draftPlace, device.Device, bool, error) {
	var gdev device.Device
	if !q.onCPU && (q.cfg.Hidden*q.cfg.Vocab >= gpuMinHead || q.onGPU) {
		var err error
		if gdev, err = openGPU(r.opts.Device, r.notify); err != nil {
			return draftPlace{}, nil, false, err
		}
		if gdev != nil {
			free, _ := gdev.MemInfo()
			q.room = &gpuRoom{name: gdev.Name(), free: free}
		}
	}
	if q.room != nil && !q.onCPU {
		q.layers = askLayers(r.model.Llama, r.ctx, len(r.slots), layersAsked(r.model.Llama, r.opts.GPULayers))
	}
	p, ok, err := placeDraft(*q)
	if (err != nil || !ok) && gdev != nil {
		gdev.Close()
		gdev = nil
	}
	return p, gdev, ok, err
}

// side names where a part goes: "cpu", or the GPU's name.
func side(onGPU bool, room *gpuRoom) string {
	if onGPU && room != nil {
		return room.name
	}
	return "cpu"
}

// placeNotice says what a placement gave up, or "".
func placeNotice(p draftPlace, learnAsked bool, room *gpuRoom, large bool) string {
	switch {
	case learnAsked && !p.learn:
		return "adaptation off: the draft's trainer does not fit in the memory available"
	case room != nil && large && !p.draftGPU:
		return fmt.Sprintf("drafting on the CPU: %s has %s free, too little for the draft", room.name, HumanBytes(room.free))
	case learnAsked && p.draftGPU && !p.trainGPU:
		return fmt.Sprintf("training the draft on the CPU: %s has too little memory free for its trainer beside the draft and the target's layers", room.name)
	}
	return ""
}
