package dgf

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrStopped is a draft's set-up given up because its caller said stop.
var ErrStopped = errors.New("draft set-up stopped")

// initChunk is how many values an initialization draws and uploads at a
// time: a 7B target's draft holds matrices of tens of millions of values,
// which drawn whole were as many bytes again of garbage, and between
// chunks a set-up in the background can be stopped.
const initChunk = 1 << 16

// Init sets every matrix to Xavier-uniform values (as the released
// Dovetail code initializes the DGF) and every norm weight to 1. Each
// parameter draws from a stream of its own (seed, its index), so its
// values do not depend on which others were drawn.
func (d *Draft) Init(seed uint64) {
	_ = d.initUnless(seed, false, nil)
}

// InitDayZero is how a draft that learns from traffic starts (day 0): as
// Init, but with the last matrix of each block's two residual branches
// (attn_output, ffn_down) at zero, so that every block starts as the identity
// and the first prediction is the DGF's fusion of its inputs. The branches
// then grow from what the gradients ask for, not from noise the early steps
// must first undo; on both test models a draft adapting from scratch reached
// a higher τ this way (docs/measurements/adaptation.md, "Day 0" and "Online
// adaptation"). Tests keep Init: with a branch at zero, the gradients of the
// weights behind it vanish at the first step.
func (d *Draft) InitDayZero(seed uint64) {
	_ = d.initUnless(seed, true, nil)
}

// DayZeroForDraftingUnless is InitDayZero, FreezeForDrafting and
// DropFloat at once, giving up with ErrStopped between chunks of values
// and between matrices once stopped (nil: never) says so.
// The matrices drafting reads in Q8_0 are drawn a few rows at a time
// straight into their Q8_0 copies, the same values the three steps give,
// so that their float32 values, most of a new draft's memory, are never
// written: a 7B target's new draft in the background took seconds of
// page faults and as many bytes of memory again for them
// (docs/measurements/memory-and-startup.md, "A new draft beside a 7B target").
func (d *Draft) DayZeroForDraftingUnless(seed uint64, stopped func() bool) error {
	ends := d.branchEnds(true)
	buf := make([]float32, initChunk)
	for i, p := range d.Params {
		if stopped != nil && stopped() {
			return ErrStopped
		}
		if !d.quantizes(p) {
			if err := d.initParam(i, p, seed, ends[p], buf, stopped); err != nil {
				return err
			}
			d.dropQ(p)
			continue
		}
		if err := d.drawFrozen(i, p, seed, ends[p], buf, stopped); err != nil {
			return err
		}
		d.Dev.Free(p.W)
		p.W = nil
	}
	return nil
}

// initUnless is Init, or with dayZero InitDayZero, giving up with
// ErrStopped as DayZeroForDraftingUnless does; the draft's values are
// then partly set.
func (d *Draft) initUnless(seed uint64, dayZero bool, stopped func() bool) error {
	ends := d.branchEnds(dayZero)
	buf := make([]float32, initChunk)
	for i, p := range d.Params {
		if stopped != nil && stopped() {
			return ErrStopped
		}
		if err := d.initParam(i, p, seed, ends[p], buf, stopped); err != nil {
			return err
		}
	}
	return nil
}

// branchEnds is the matrices a day-0 draft starts at zero (none unless
// dayZero).
func (d *Draft) branchEnds(dayZero bool) map[*Param]bool {
	ends := map[*Param]bool{}
	if dayZero {
		for _, p := range d.residualEnds {
			ends[p] = true
		}
	}
	return ends
}

// initParam sets parameter i, p, as Init does (zero: to zero), a chunk of
// buf at a time.
func (d *Draft) initParam(i int, p *Param, seed uint64, zero bool, buf []float32, stopped func() bool) error {
	if zero {
		d.Dev.Zero(p.W)
		return nil
	}
	if p.Rows == 1 {
		fill(buf, 1)
	}
	src, a := stream(seed, i), xavier(p)
	for off := 0; off < p.Size(); off += len(buf) {
		if off > 0 && stopped != nil && stopped() {
			return ErrStopped
		}
		v := buf[:min(len(buf), p.Size()-off)]
		if p.Rows != 1 {
			uniform(v, src, a)
		}
		d.Dev.Upload(d.Dev.View(p.W, off, len(v)), v)
	}
	return nil
}

// drawFrozen sets parameter i's Q8_0 copy to Init's values for it (zero:
// to zero), drawn a chunk of rows at a time into buf (grown to a row if
// need be); its float32 values are left as they are.
func (d *Draft) drawFrozen(i int, p *Param, seed uint64, zero bool, buf []float32, stopped func() bool) error {
	src, a := stream(seed, i), xavier(p)
	per := max(1, len(buf)/p.Cols) // rows a chunk
	chunk := slices.Grow(buf[:0], per*p.Cols)[:per*p.Cols]
	if zero {
		clear(chunk)
	}
	return d.freezeRows(p, func(r int) ([]float32, error) {
		k := r % per
		if k == 0 && !zero {
			if r > 0 && stopped != nil && stopped() {
				return nil, ErrStopped
			}
			// Whole rows of even length: the stream gives the values it
			// gives Init's chunks.
			uniform(chunk[:min(per, p.Rows-r)*p.Cols], src, a)
		}
		return chunk[k*p.Cols : (k+1)*p.Cols], nil
	})
}

// stream is the random source of parameter i's values.
func stream(seed uint64, i int) *rand.PCG {
	return rand.NewPCG(seed, 0x9e3779b97f4a7c15+uint64(i))
}

// xavier is the bound of p's uniform values, sqrt(6/(rows+cols)).
func xavier(p *Param) float32 {
	return float32(math.Sqrt(6 / float64(p.Rows+p.Cols)))
}

// uniform fills v with values uniform in [-a, a), two of 24 random bits
// from each of src's 64-bit outputs.
func uniform(v []float32, src *rand.PCG, a float32) {
	const unit = 1.0 / (1 << 24)
	for i := 0; i < len(v); i += 2 {
		u := src.Uint64()
		v[i] = (2*float32(u>>40)*unit - 1) * a
		if i+1 < len(v) {
			v[i+1] = (2*float32(u>>16&(1<<24-1))*unit - 1) * a
		}
	}
}

func fill(v []float32, x float32) {
	for i := range v {
		v[i] = x
	}
}
