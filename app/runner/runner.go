package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"dovetail/app/runner/store"
	"dovetail/cpu"
	"dovetail/device"
	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/plan"
	"dovetail/engine/tree"
	"dovetail/internal/plural"
	"dovetail/internal/sysmem"
)

// Runner runs one model: its slots (sequences over one packed copy of the
// weights, each on threads of its own), their drafters, the planner, and
// online adaptation. Each slot serves one generation at a time; slots run
// concurrently.
type Runner struct {
	model  *Model
	opts   Options
	store  *store.Store
	ctx    int // context per slot
	per    int // threads per slot
	budget Budget
	fast   *cpu.Fast
	off    *gpuLayers // the target's layers on a GPU, or nil
	// release gives back the heap limit's share this runner holds.
	release func()
	slots   []*Slot
	draft   *drafting
	plan    *plan.Planner
	// export names the target layers an EAGLE-3 draft reads (nil: the
	// final hidden state, as every other draft).
	export *[3]int
	// placement guards the slots' targets and r.off: generations read
	// them, a fallback to fewer GPU layers replaces them (gpufault.go).
	placement sync.RWMutex

	// mu guards the slots' drafters and the draft's adaptation, which a
	// draft starting in the background sets (dayzero.go).
	mu            sync.Mutex
	notices       []Notice
	closed        bool
	pauseLearning bool
	// Generations under way and when the last ended (at first: when New
	// returned), for a background start that waits for a quiet moment.
	active    int
	lastEnd   time.Time
	genTokens int           // generated in all, for the history
	genTime   time.Duration // spent generating them
}

// Slot is one sequence of the runner's model with its drafter.
type Slot struct {
	r       *Runner
	pool    *cpu.Pool
	target  *cpu.Target
	drafter engine.Drafter // nil: none
}

// New places m's work under the memory budget and builds its slots and
// drafters. The runner does not own m: close the runner, then the model.
func New(m *Model, o Options) (*Runner, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{model: m, opts: o, ctx: o.Ctx}
	if o.Tree == (tree.Params{}) {
		r.opts.Tree = tree.Server
	}
	if r.store = o.Store; r.store == nil {
		st, err := store.Open()
		if err != nil {
			r.notify(Notice{Warning: true, Text: fmt.Sprintf("nothing will be saved: %v", err)})
		} else {
			r.store = st
		}
	}
	threads := o.Threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	n := max(1, o.Slots)
	r.per = max(1, threads/n)
	train := m.Config().ContextLength
	if r.ctx <= 0 {
		r.ctx = min(train, MaxContext)
	}
	if err := r.placeTarget(n); err != nil {
		return nil, err
	}
	if r.ctx > train {
		r.notify(Notice{Warning: true, Text: fmt.Sprintf("context %d is beyond the %d tokens %s was trained on: output may degrade past that", r.ctx, train, m.Name)})
	}
	for range n {
		r.slots = append(r.slots, &Slot{r: r, pool: cpu.NewPool(r.per)})
	}
	// New counts as a generation under way: a day-0 draft set up below
	// starts once New has returned and the runner has been quiet.
	r.mu.Lock()
	r.active = 1
	r.mu.Unlock()
	d, err := r.openDrafting()
	if err != nil {
		r.closeSlots()
		return nil, err
	}
	r.draft = d // openTarget names it
	// The target's layers take the GPU memory the draft leaves.
	if err := r.openTarget(n); err != nil {
		d.close()
		r.closeSlots()
		return nil, err
	}
	r.mu.Lock()
	r.draft = d
	for i, dr := range d.drafters {
		r.slots[i].drafter = dr
	}
	drafting := len(d.drafters) > 0 || d.dayZero != nil
	r.active = 0
	r.lastEnd = time.Now() // a caller's first request comes now
	r.mu.Unlock()
	r.budget.HeapLimit, r.release = holdMemory(r.budget.CPU())
	if drafting && o.Plan {
		r.plan = r.planner()
	}
	return r, nil
}

// placeTarget counts the target's weights and each slot's cache and
// scratch, and refuses them when they do not fit in the memory available,
// naming the cache when it alone is what does not fit. (The context is at
// most MaxContext: no model that loads has a cache per slot past 2^64.)
func (r *Runner) placeTarget(slots int) error {
	fp := cpu.MeasureTarget(r.model.Llama, r.ctx, r.per)
	r.budget.add("weights", "cpu", fp.Weights)
	r.budget.add("rope table", "cpu", fp.Tables)
	r.budget.add("kv cache", "cpu", satMul(uint64(slots), fp.KV))
	r.budget.add("scratch", "cpu", satMul(uint64(slots), fp.Scratch))
	if info, err := sysmem.Read(); err == nil {
		r.budget.Available = info.Available
	}
	if l := r.opts.MemoryLimit; l > 0 && (r.budget.Available == 0 || l < r.budget.Available) {
		r.budget.Available = l
	}
	if !r.budget.fits() {
		e := &MemoryError{Budget: r.budget, Hint: "choose a smaller context (--ctx) or fewer parallel sequences"}
		if kv := r.budget.part("kv cache"); satAdd(kv, fp.Weights) > r.budget.Available {
			e.Cause = fmt.Sprintf("a context of %d positions needs a kv cache of %s for %d sequence(s), beside %s of weights",
				r.ctx, HumanBytes(kv), slots, HumanBytes(fp.Weights))
		}
		return e
	}
	return nil
}

// notify hands a notice to Options.Notify, or keeps it for Notices.
func (r *Runner) notify(n Notice) {
	if r.opts.Notify != nil {
		r.opts.Notify(n)
		return
	}
	r.mu.Lock()
	r.notices = append(r.notices, n)
	r.mu.Unlock()
}

// Notices returns the notices kept since the last call (with no
// Options.Notify).
func (r *Runner) Notices() []Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.notices
	r.notices = nil
	return n
}

// Model is the model the runner runs.
func (r *Runner) Model() *Model { return r.model }

// Context is each slot's context length.
func (r *Runner) Context() int { return r.ctx }

// Threads is each slot's CPU threads.
func (r *Runner) Threads() int { return r.per }

// Slots is the number of slots.
func (r *Runner) Slots() int { return len(r.slots) }

// Slot is slot i.
func (r *Runner) Slot(i int) *Slot { return r.slots[i] }

// Budget is the memory the placement takes, part by part.
func (r *Runner) Budget() Budget { return r.budget }

// Draft says which drafter runs, where, and how it adapts.
func (r *Runner) Draft() DraftInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.draft.info
}

// adaptiveDraft is the draft's adaptation, nil when it does not adapt (or
// has not started yet).
func (r *Runner) adaptiveDraft() *adaptive {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.draft == nil {
		return nil
	}
	return r.draft.adaptive
}

// Tree is the draft tree's shape (the planner's starting point).
func (r *Runner) Tree() tree.Params { return r.opts.Tree }

// Planner is the cost model choosing trees, or nil when it does not run.
func (r *Runner) Planner() *plan.Planner { return r.plan }

// Adaptation is what online adaptation has done so far; ok is false when
// the draft does not adapt.
func (r *Runner) Adaptation() (st adapt.Stats, ok bool) {
	a := r.adaptiveDraft()
	if a == nil {
		return st, false
	}
	return a.adapter.Stats(), true
}

// PauseLearning pauses (or resumes) the trainer of an adapting draft;
// drafting and the text memory go on.
func (r *Runner) PauseLearning(p bool) {
	r.mu.Lock()
	r.pauseLearning = p // for a draft still starting
	r.mu.Unlock()
	if a := r.adaptiveDraft(); a != nil {
		a.adapter.SetPaused(p)
	}
}

// ClearMemory forgets the text memory of the model, here and on disk.
func (r *Runner) ClearMemory() error {
	if a := r.adaptiveDraft(); a != nil {
		return a.clearMemory()
	}
	if r.store == nil {
		return nil
	}
	if err := os.Remove(r.store.MemoryPath(r.model.Fingerprint)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Store is where the runner keeps its files (nil: nowhere).
func (r *Runner) Store() *store.Store { return r.store }

// Target is the slot's sequence of the model, for callers that drive it
// themselves.
func (s *Slot) Target() engine.Target { return s.target }

// Drafter is the slot's drafter, nil without one.
func (s *Slot) Drafter() engine.Drafter {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.drafter
}

// Generate runs req on the slot. Unless req names a drafter of its own,
// the slot's drafter drafts, with the runner's tree and planner.
func (s *Slot) Generate(ctx context.Context, req engine.Request, emit func(token int) error) (engine.Stats, error) {
	defer s.r.generating()()
	if dr := s.Drafter(); req.Drafter == nil && dr != nil {
		req.Drafter, req.Tree, req.Planner = dr, s.r.opts.Tree, s.r.plan
	}
	var st engine.Stats
	err := s.generate(ctx, req, emit, &st)
	s.r.tally(st)
	return st, s.r.modelError(err)
}

// Plain runs req on the slot without any drafter: the target alone, what
// speculative output must equal.
func (s *Slot) Plain(ctx context.Context, req engine.Request, emit func(token int) error) (engine.Stats, error) {
	defer s.r.generating()()
	req.Drafter, req.Planner = nil, nil
	var st engine.Stats
	err := s.generate(ctx, req, emit, &st)
	return st, s.r.modelError(err)
}

// modelError names the model in an error that is the model's own: logits
// that are not numbers.
func (r *Runner) modelError(err error) error {
	if errors.Is(err, engine.ErrNotFinite) {
		return fmt.Errorf("%s: %w: its weights are damaged or its numbers overflow; check the file, or try another quantization", r.model.Name, err)
	}
	return err
}

// generating counts a generation under way until the function it returns
// is called.
func (r *Runner) generating() func() {
	r.mu.Lock()
	r.active++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.active--
		r.lastEnd = time.Now()
		r.mu.Unlock()
	}
}

// quietFor reports whether no generation has run for d.
func (r *Runner) quietFor(d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active == 0 && time.Since(r.lastEnd) >= d
}

// Close stops adaptation, saves what it learned, and frees the slots and
// drafters. Errors are what could not be saved. Closing twice does
// nothing.
func (r *Runner) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	if r.draft != nil && r.draft.dayZero != nil {
		r.draft.dayZero.stop()
		<-r.draft.dayZero.ready
	}
	var err error
	if r.draft != nil {
		if herr := r.record(); herr != nil {
			r.notify(Notice{Warning: true, Text: fmt.Sprintf("the speed history is not kept: %v", herr)})
		}
		err = r.draft.close()
	}
	r.closeSlots()
	if r.release != nil {
		r.release()
	}
	return err
}

func (r *Runner) closeSlots() {
	r.closeTargets()
	for _, s := range r.slots {
		s.pool.Close()
	}
	r.off.close()
	r.off = nil
}

// openTarget places the target's layers (placeLayers) and makes each
// slot's sequence over one packed copy of the CPU's share. Where the GPU
// runs out of memory for the sequences' caches, it says so and tries
// again with half the layers there, down to none.
func (r *Runner) openTarget(slots int) error { return r.openTargetAtMost(slots, -1) }

// openTargetAtMost is openTarget with at most most layers on the GPU (-1:
// as many as --gpu-layers and the memory say).
func (r *Runner) openTargetAtMost(slots, most int) error {
	for {
		budget := r.budget
		budget.Parts = slices.Clone(r.budget.Parts)
		off, err := r.placeLayers(slots, most)
		if err != nil {
			return err
		}
		r.off = off
		err = r.openSlots()
		var de *device.Error
		if err == nil || off == nil || !errors.As(err, &de) {
			return err
		}
		k := r.model.Config().Layers - off.layers.From
		r.notify(Notice{Warning: true, Text: fmt.Sprintf("the caches of %s did not fit on %s (%v): trying %d", plural.Of(k, "target layer"), off.dev.Name(), de, k/2)})
		r.closeTargets()
		r.off.close()
		r.off, r.budget, most = nil, budget, k/2
	}
}

// openSlots makes each slot's target sequence over r.off's split.
func (r *Runner) openSlots() error {
	r.fast = cpu.NewFastWith(r.model.Llama, cpu.DefaultKernels(), r.slots[0].pool, r.ctx, cpu.Options{Offload: r.off.cpuSide()})
	for _, s := range r.slots {
		s.target = cpu.NewTargetWith(r.fast.WithPool(s.pool))
		if err := s.target.Err(); err != nil {
			return err
		}
		if r.export != nil {
			if err := s.target.ExportLayers(*r.export); err != nil {
				return fmt.Errorf("draft %s: %w", r.draft.info.Name, err)
			}
		}
	}
	return nil
}

// closeTargets frees the slots' target sequences.
func (r *Runner) closeTargets() {
	for _, s := range r.slots {
		if s.target != nil {
			s.target.Close()
			s.target = nil
		}
	}
}
