package runner

import (
	"fmt"
	"runtime"
	"time"

	"dovetail/app/runner/store"
	"dovetail/device"
	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
)

// Options say how a model runs. Start from DefaultOptions: a front end
// sets what its user chose.
type Options struct {
	// Threads is the CPU threads in all, split between the slots (0: every
	// logical CPU). More than the machine has is refused.
	Threads int
	// Ctx is each sequence's context length (0: the model's, at most
	// MaxContext). Beyond the model's training length it runs with a
	// warning, as llama.cpp's does; beyond MaxContext, or with a cache
	// that does not fit in memory, it is refused.
	Ctx int
	// Slots is the sequences generated at the same time, each with its
	// own cache over the one copy of the weights (0: 1).
	Slots int
	// MemoryLimit caps the host memory the placement may take, in bytes
	// (0: what the machine has available).
	MemoryLimit uint64
	// Draft picks the drafter (see DraftKind).
	Draft DraftChoice
	// Device is where a DGF draft runs and trains.
	Device DeviceChoice
	// GPULayers is how many of the target's last layers run on that GPU
	// (with its final norm and LM head): GPULayersAuto lets the placement
	// choose from the memory left after the draft; 0: none.
	GPULayers int
	Tree      tree.Params
	// Plan lets the cost model choose the tree each round and decode
	// without drafting while drafting would be slower.
	Plan bool
	// Greedy says requests decode greedily (a DGF draft then ranks its
	// tree more sharply).
	Greedy bool
	Adapt  Adapt
	// NewDrafter, when set, makes each slot's drafter in place of Draft:
	// a drafter of the caller's own.
	NewDrafter func(slot int) (engine.Drafter, error)
	// Store keeps drafts, memories and profiles (nil: the user's).
	Store *store.Store
	// Notify receives notices as they come, at open and later (a failed
	// save on the trainer's goroutine); nil keeps them for Notices.
	Notify func(Notice)
	// Predicted is the decode speed setup predicted for these settings
	// (0: none), recorded beside what the runner measures.
	Predicted float64

	// layerDevice, in tests, is the device offloaded layers go to in place
	// of a GPU (the host device's layer path).
	layerDevice func() (device.Device, error)
}

// MaxContext is the longest context a runner opens: 16M positions, past
// the longest any model is trained on, and short enough that no size the
// memory budget counts overflows.
const MaxContext = 1 << 24

// DefaultOptions are what `dovetail run` does without flags.
func DefaultOptions() Options {
	return Options{GPULayers: GPULayersAuto, Tree: tree.Server, Plan: true, Adapt: DefaultAdapt()}
}

// Adapt are the online adaptation settings of a DGF draft.
type Adapt struct {
	Mode   adapt.Mode
	Engine adapt.Config // the loop's recipe (Mode is set from Mode above)
	// The trainer's recipe: learning rate, per-request anchor weight,
	// training-time-test steps.
	LR, Anchor float32
	Unroll     int
	Threads    int  // of a trainer on the CPU
	Idle       bool // a trainer on the CPU computes on an idle-priority thread
	// SaveEvery is how often the adapted draft and text memory are saved
	// while they change (0: only at Close); Save false saves nothing.
	SaveEvery time.Duration
	Save      bool
	// Recall starts from the text memory saved for the target (a
	// benchmark starts from nothing).
	Recall bool
}

// DefaultAdapt are the measured defaults (docs/measurements/adaptation.md,
// "The defaults of adaptation").
func DefaultAdapt() Adapt {
	return Adapt{Mode: adapt.Background, Engine: adapt.DefaultConfig(), LR: 1e-3, Anchor: 1, Unroll: 1,
		Threads: 1, Idle: true, SaveEvery: time.Minute, Save: true, Recall: true}
}

// Validate names the first setting out of range.
func (a Adapt) Validate() error {
	c := a.Engine
	switch {
	case c.Duty <= 0 || c.Duty > 1:
		return fmt.Errorf("adaptation duty %g outside (0, 1]", c.Duty)
	case a.Threads < 1 || a.Threads > 1024:
		return fmt.Errorf("adaptation threads %d out of range [1, 1024]", a.Threads)
	case a.SaveEvery < 0:
		return fmt.Errorf("adaptation save interval %v must not be negative", a.SaveEvery)
	case !(a.LR > 0) || a.Anchor < 0 || a.Unroll < 1 || a.Unroll > 16 || c.Steps < 1 || c.Window < 3 || c.Batch < 1 ||
		c.Control.MinRecords < 1 || c.Branches < 0 || c.Branches > 1 || c.MemoryTokens < 0 || c.MemoryTokens > 1<<28:
		return fmt.Errorf("adaptation recipe out of range: lr %g, anchor %g, unroll %d, steps %d, window %d, batch %d, min records %d, branches %g, memory %d",
			a.LR, a.Anchor, a.Unroll, c.Steps, c.Window, c.Batch, c.Control.MinRecords, c.Branches, c.MemoryTokens)
	}
	return nil
}

// Validate names the first option out of range: what no front end may
// pass on to the runtime.
func (o Options) Validate() error {
	n := runtime.NumCPU()
	switch {
	case o.Threads < 0 || o.Threads > n:
		return fmt.Errorf("threads %d out of range: this machine has %d logical CPUs", o.Threads, n)
	case o.Ctx < 0 || o.Ctx > MaxContext:
		return fmt.Errorf("context %d out of range [0, %d]", o.Ctx, MaxContext)
	case o.Slots < 0 || o.Slots > 256:
		return fmt.Errorf("parallel sequences %d out of range [1, 256]", o.Slots)
	case o.GPULayers < GPULayersAuto:
		return fmt.Errorf("GPU layers %d: want a number of layers, 0 (none) or auto", o.GPULayers)
	}
	if err := o.Tree.Validate(); err != nil {
		return err
	}
	if err := o.Adapt.Validate(); err != nil {
		return err
	}
	if o.Adapt.Mode == adapt.PerRequest && o.Slots > 1 {
		return fmt.Errorf("per-request adaptation adapts the one draft to one request at a time: use one parallel sequence")
	}
	return nil
}

// Notice is something a user should know: a warning (a draft that did
// not load, a save that failed) or information (where files are kept).
type Notice struct {
	Warning bool
	Text    string
}

func (n Notice) String() string {
	if n.Warning {
		return "warning: " + n.Text
	}
	return n.Text
}
