package runner

import (
	"context"
	"errors"
	"fmt"

	"dovetail/device"
	"dovetail/engine"
	"dovetail/internal/plural"
)

// A GPU that fails in the middle of a run (out of memory, say: another
// program took what the runner measured free) is met as the start meets
// one: the target's layers there go to half as many, down to none, with
// a warning, and the generation that met it runs again on the new
// placement if it had not yet given out a token. The runner goes on; no
// panic reaches the caller.

// generate runs req on the slot's target into st.
func (s *Slot) generate(ctx context.Context, req engine.Request, emit func(token int) error, st *engine.Stats) error {
	emitted := false
	count := func(tok int) error {
		emitted = true
		return emit(tok)
	}
	return s.onTarget(func() (err error) {
		*st, err = engine.Generate(ctx, s.target, req, count)
		return err
	}, func() bool { return !emitted })
}

// onTarget runs f on the slot's target under the placement, and where the
// GPU's layers failed it, moves them (fewerLayers) and runs f once more if
// again() says it may (a generation that gave out tokens may not: it
// returns its error, and the next runs on the fewer layers).
func (s *Slot) onTarget(f func() error, again func() bool) error {
	r := s.r
	run := func() (*gpuLayers, error) {
		r.placement.RLock()
		defer r.placement.RUnlock()
		if s.target == nil {
			return nil, fmt.Errorf("%s: no target: it could not be set up again after the GPU failed", r.model.Name)
		}
		return r.off, f()
	}
	off, err := run()
	if err == nil || !r.fewerLayers(off, err) || !again() {
		return err
	}
	_, err = run()
	return err
}

// fewerLayers reports whether err is a failure of off's GPU, after which
// the target's layers there are half as many (unless another generation
// already moved them): the caller may run again.
func (r *Runner) fewerLayers(off *gpuLayers, err error) bool {
	var de *device.Error
	if off == nil || !errors.As(err, &de) {
		return false
	}
	r.placement.Lock()
	defer r.placement.Unlock()
	if r.off != off {
		return true
	}
	k := r.model.Config().Layers - off.layers.From
	r.notify(Notice{Warning: true, Text: fmt.Sprintf("%s failed with %s on it (%v): trying %d", off.dev.Name(), plural.Of(k, "target layer"), de, k/2)})
	r.closeTargets()
	r.budget.drop("target layers", off.dev.Name())
	r.budget.giveBack("weights", off.weights)
	r.budget.giveBack("kv cache", off.kv)
	r.off.close()
	r.off = nil
	if oerr := r.openTargetAtMost(len(r.slots), k/2); oerr != nil {
		r.notify(Notice{Warning: true, Text: fmt.Sprintf("the target could not be set up again: %v", oerr)})
		r.closeTargets()
		return false
	}
	return true
}
