package runner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"dovetail/cpu"
	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/internal/plural"
	"dovetail/models"
	"dovetail/offload"
)

// GPULayersAuto is the Options.GPULayers that lets the placement choose.
const GPULayersAuto = -1

// gpuReserve is GPU memory left free beside the draft and the target's
// layers: the CUDA context, the driver's own allocations and the
// allocator's slack, which no buffer count sees.
const gpuReserve = 512 << 20

// gpuMinLayerBytes is the size of a target layer's weights, as its file holds
// them, from which --gpu-layers auto puts layers on a GPU: below it the CPU
// reads a layer faster than the GPU path launches the layer's kernels and
// waits for them, so offloading would slow decoding down
// (docs/measurements/gpu.md, "The CUDA tests and the target's layers on a
// GPU, measured on one").
const gpuMinLayerBytes = 8 << 20

// layerBytes is the mean size of one of m's layers in its file.
func layerBytes(m *models.Llama) uint64 {
	L := uint64(m.Config.Layers)
	if L == 0 {
		return 0
	}
	all := offloadedFileBytes(m, 0)
	if m.Output != m.TokenEmbd {
		all -= tensorBytes(m.Output)
	}
	return all / L
}

// ParseGPULayers reads --gpu-layers: auto, or a number of layers (0:
// none; more than the model has: all of them, as llama.cpp's -ngl 999).
func ParseGPULayers(s string) (int, error) {
	if strings.EqualFold(s, "auto") {
		return GPULayersAuto, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--gpu-layers %q: want auto or a number of layers (0: none)", s)
	}
	return n, nil
}

// gpuLayersFit is how many of m's last layers, at most most, fit in avail
// bytes of a GPU, with the final norm and the LM head, which go first
// (llama.cpp's order; with sharedHead the draft's copy of the head,
// counted with the draft), and seqs sequences' KV caches of ctx
// positions; and the bytes they take. Each layer is counted as the device
// holds it.
func gpuLayersFit(m *models.Llama, ctx, seqs, most int, avail uint64, sharedHead bool) (int, uint64) {
	a, err := measureLayers(m, ctx, seqs)
	if err != nil {
		return 0, 0
	}
	if sharedHead {
		a.lendHead(m)
	}
	return a.fit(avail, most)
}

// headBytes is m's LM head on a GPU.
func headBytes(m *models.Llama) uint64 {
	c := device.NewCounter(true)
	if _, err := c.UploadMatrix(m.Output); err != nil {
		return 0
	}
	return c.Held()
}

// layersAsked is the most of m's last layers --gpu-layers want puts on a
// GPU: all of them under auto where they gain (offload.Check,
// gpuMinLayerBytes), up to want for a number, none for 0.
func layersAsked(m *models.Llama, want int) int {
	switch {
	case want == 0 || offload.Check(m) != nil:
		return 0
	case want == GPULayersAuto && layerBytes(m) < gpuMinLayerBytes:
		return 0
	case want == GPULayersAuto:
		return m.Config.Layers
	}
	return min(want, m.Config.Layers)
}

// layerAsk is what the target's layers will ask of a GPU once the draft
// is there: up to most of its last layers, as many as fit. placeDraft
// puts the trainer on the GPU only in the room they leave.
type layerAsk struct {
	a    layerArith
	most int
}

// askLayers is what up to most of m's layers ask of a GPU for seqs
// sequences of ctx positions (nil: none go).
func askLayers(m *models.Llama, ctx, seqs, most int) *layerAsk {
	if most <= 0 {
		return nil
	}
	a, err := measureLayers(m, ctx, seqs)
	if err != nil {
		return nil
	}
	return &layerAsk{a: a, most: most}
}

// bytes is what the layers take of avail bytes.
func (l *layerAsk) bytes(avail uint64) uint64 {
	if l == nil {
		return 0
	}
	_, n := l.a.fit(avail, l.most)
	return n
}

// cpuKVBytes is the CPU's KV cache of k layers for seqs sequences of ctx
// positions.
func cpuKVBytes(m *models.Llama, ctx, seqs, k int) uint64 {
	return cpu.KVBytes(m.Config, ctx, k) * uint64(seqs)
}

// gpuAvail is what a GPU of free bytes has for the target's layers once
// the parts of b already placed there (the draft, its trainer) and the
// reserve are taken.
func gpuAvail(free uint64, b Budget) uint64 {
	used := b.GPU() + gpuReserve
	if free <= used {
		return 0
	}
	return free - used
}

// gpuLayers is the target's layers on a device, and the device.
type gpuLayers struct {
	dev    device.Device
	layers *offload.Layers
	// What placing them took off the CPU's budget (weights, keys and
	// values), which a fallback to fewer layers gives back.
	weights, kv uint64
}

func (o *gpuLayers) close() {
	if o == nil {
		return
	}
	o.layers.Free()
	o.dev.Close()
}

// cpuSide is what cpu.Fast is told of the offloaded layers (nil: none).
func (o *gpuLayers) cpuSide() *cpu.Offload {
	if o == nil {
		return nil
	}
	return &cpu.Offload{From: o.layers.From, NewSeq: func(ctx int) (cpu.OffloadSeq, error) {
		s, err := o.layers.NewSeq(ctx)
		if err != nil {
			return nil, err
		}
		return s, nil
	}}
}

// placeLayers puts the target's last layers on a GPU: Options.GPULayers
// of them, or under auto as many as fit in its free memory after the
// draft, its trainer and gpuReserve (none when its layers are under
// gpuMinLayerBytes), at most most of them (< 0: no cap), fewer when the
// device runs out. It returns nil when none go, with a one-line notice
// when some were asked for and cannot.
func (r *Runner) placeLayers(seqs, most int) (*gpuLayers, error) {
	want, m := r.opts.GPULayers, r.model.Llama
	if want == 0 {
		return nil, nil
	}
	warn := func(format string, a ...any) {
		if want > 0 {
			r.notify(Notice{Warning: true, Text: fmt.Sprintf(format, a...)})
		}
	}
	if err := offload.Check(m); err != nil {
		warn("--gpu-layers %d: %v: every layer runs on the CPU", want, err)
		return nil, nil
	}
	if want == GPULayersAuto && layerBytes(m) < gpuMinLayerBytes {
		return nil, nil // faster on the CPU; a number given stands
	}
	dev, err := r.layerDevice()
	switch {
	case errors.Is(err, cuda.ErrNoDevice):
		warn("--gpu-layers %d: no NVIDIA GPU here: every layer runs on the CPU", want)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("--gpu-layers: %w", err)
	case dev == nil:
		warn("--gpu-layers %d: --device cpu keeps every layer on the CPU", want)
		return nil, nil
	}
	L := m.Config.Layers
	free := r.budget.GPUFree
	if free == 0 {
		free, _ = dev.MemInfo()
	}
	head := r.draft.sharedHead(dev)
	fit, _ := gpuLayersFit(m, r.ctx, seqs, L, gpuAvail(free, r.budget), head != nil)
	k := fit
	if want > 0 {
		k = min(want, L)
		if onHost := device.OnHost(dev); k > fit && !onHost {
			warn("--gpu-layers %d: %d of %d layers fit in the %s free on %s: the other %d run on the CPU",
				want, fit, L, HumanBytes(free), dev.Name(), L-fit)
			k = fit
		}
	}
	if most >= 0 {
		k = min(k, most)
	}
	if r.export != nil && k > L-r.export[2] {
		// The EAGLE-3 draft reads the residual stream before its layers,
		// which only the CPU's part hands out.
		warn("--gpu-layers %d: the EAGLE-3 draft reads layer %d's input: %d layers go to the GPU", want, r.export[2], L-r.export[2])
		k = L - r.export[2]
	}
	for ; k > 0; k /= 2 {
		layers, err := offload.NewWithHead(dev, m, L-k, head)
		if err == nil {
			bytes, _ := offload.Measure(m, L-k, r.ctx, seqs, !device.OnHost(dev))
			if head != nil {
				bytes -= min(bytes, headBytes(m)) // the draft's, counted with it
			}
			r.budget.add("target layers", dev.Name(), bytes)
			g := &gpuLayers{dev: dev, layers: layers}
			if !device.OnHost(dev) {
				g.weights, g.kv = r.leaveFile(L-k), cpuKVBytes(m, r.ctx, seqs, k)
				r.budget.take("kv cache", g.kv)
			}
			return g, nil
		}
		var de *device.Error
		if !errors.As(err, &de) {
			dev.Close()
			return nil, err
		}
		r.notify(Notice{Warning: true, Text: fmt.Sprintf("%s did not fit on %s (%v): trying %d", plural.Of(k, "target layer"), dev.Name(), err, k/2)})
		// The matrices a failed attempt uploaded stay the device's until
		// it closes: the next one starts on a fresh one.
		dev.Close()
		if k/2 == 0 {
			return nil, nil
		}
		if dev, err = r.layerDevice(); err != nil || dev == nil {
			return nil, err
		}
		head = r.draft.sharedHead(dev)
	}
	dev.Close()
	return nil, nil
}

// layerDevice opens the GPU the layers go to: the one --device names, or
// the first; none under --device cpu.
func (r *Runner) layerDevice() (device.Device, error) {
	if r.opts.layerDevice != nil {
		return r.opts.layerDevice()
	}
	if r.opts.Device.Kind == DeviceCPU {
		return nil, nil
	}
	return cuda.Open(r.opts.Device.Ordinal)
}

// leaveFile takes the matrices of layers [from, L) and the LM head, which
// a GPU now holds, out of the CPU's weights: their pages of the file are
// let go, and the budget no longer counts them. It returns the bytes.
func (r *Runner) leaveFile(from int) uint64 {
	m := r.model.Llama
	for _, t := range offloadedTensors(m, from) {
		if m.File != nil {
			m.File.Evict(t.Data)
		}
	}
	n := offloadedFileBytes(m, from)
	r.budget.take("weights", n)
	return n
}

// offloadedTensors are the matrices a GPU holds with layers [from, L):
// theirs and the LM head (unless it is the embeddings, which the CPU
// still reads).
func offloadedTensors(m *models.Llama, from int) []*models.Tensor {
	var ts []*models.Tensor
	for i := from; i < m.Config.Layers; i++ {
		l := &m.Layers[i]
		ts = append(ts, l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down)
	}
	if m.Output != m.TokenEmbd {
		ts = append(ts, m.Output)
	}
	return ts
}

// offloadedFileBytes is the file's bytes of offloadedTensors.
func offloadedFileBytes(m *models.Llama, from int) uint64 {
	return tensorBytes(offloadedTensors(m, from)...)
}
