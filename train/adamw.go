// Package train adapts a DGF draft (package dgf) to its target: the
// AdamW optimizer, the trainer (EAGLE's loss with training-time test, on
// batches of windows of the target's features), the scorer that compares
// two drafts on held-out windows, the learner that trains a shadow of a
// live draft and publishes it when it is better, and Measure, the memory
// a draft and its trainer take.
package train

import (
	"fmt"
	"math"
	"strconv"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/models/draft"
)

// Optimizer is AdamW over a draft's parameters, with global gradient-norm
// clipping.
type Optimizer struct {
	d    *dgf.Draft
	m, v []device.Buffer
	Step int // updates done
}

// NewOptimizer allocates zero moments for every parameter of d, in the
// device's compact form for them if it has one (device.AllocMoment).
func NewOptimizer(d *dgf.Draft) *Optimizer {
	o := &Optimizer{d: d}
	for _, p := range d.Params {
		o.m = append(o.m, device.AllocMoment(d.Dev, p.Size()))
		o.v = append(o.v, device.AllocMoment(d.Dev, p.Size()))
	}
	return o
}

// GradNorm is the L2 norm of all gradients together.
func (o *Optimizer) GradNorm() float64 {
	var s float64
	for _, p := range o.d.Params {
		s += o.d.Dev.SumSquares(p.G)
	}
	return math.Sqrt(s)
}

// Update applies one AdamW step at learning rate lr, first scaling the
// gradients so that their global norm is at most clip (≤ 0: no clipping).
// It returns the norm before clipping. A non-finite norm skips the update.
func (o *Optimizer) Update(lr, beta1, beta2, eps, weightDecay, clip float32) float64 {
	norm := o.GradNorm()
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm
	}
	scale := float32(1)
	if clip > 0 && norm > float64(clip) {
		scale = float32(float64(clip) / norm)
	}
	o.Step++
	hp := device.AdamW{LR: lr, Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: weightDecay, Step: o.Step, GradScale: scale}
	for i, p := range o.d.Params {
		o.d.Dev.AdamWUpdate(p.W, p.G, o.m[i], o.v[i], hp, p.Decay)
	}
	return norm
}

const metaAdamStep = "adam.step"

// Save adds the moments and step count to ck, so that training resumes
// where it stopped.
func (o *Optimizer) Save(ck *draft.Checkpoint) {
	for i, p := range o.d.Params {
		m, v := make([]float32, p.Size()), make([]float32, p.Size())
		o.d.Dev.Download(m, o.m[i])
		o.d.Dev.Download(v, o.v[i])
		ck.Tensors[draft.PrefixAdamM+p.Name] = m
		ck.Tensors[draft.PrefixAdamV+p.Name] = v
	}
	ck.Meta[metaAdamStep] = strconv.Itoa(o.Step)
}

// Load restores what Save stored.
func (o *Optimizer) Load(ck *draft.Checkpoint) error {
	step, err := strconv.Atoi(ck.Meta[metaAdamStep])
	if err != nil || step < 0 {
		return fmt.Errorf("draft checkpoint holds no optimizer state")
	}
	for i, p := range o.d.Params {
		m, ok1 := ck.Tensors[draft.PrefixAdamM+p.Name]
		v, ok2 := ck.Tensors[draft.PrefixAdamV+p.Name]
		if !ok1 || !ok2 {
			return fmt.Errorf("draft checkpoint: optimizer state of %s missing", p.Name)
		}
		o.d.Dev.Upload(o.m[i], m)
		o.d.Dev.Upload(o.v[i], v)
	}
	o.Step = step
	return nil
}

// Reset forgets the moments and the step count: a fresh start.
func (o *Optimizer) Reset() {
	for i := range o.m {
		o.d.Dev.Zero(o.m[i])
		o.d.Dev.Zero(o.v[i])
	}
	o.Step = 0
}

// Free releases the moments.
func (o *Optimizer) Free() {
	for i := range o.m {
		o.d.Dev.Free(o.m[i])
		o.d.Dev.Free(o.v[i])
	}
}
