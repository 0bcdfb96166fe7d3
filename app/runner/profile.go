package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/klauspost/cpuid/v2"

	"dovetail/app/runner/store"
	"dovetail/cpu"
	"dovetail/engine/plan"
)

// Calibration is what predictions need of one model on this machine at a
// number of threads: the target's costs, and a draft step's on each
// device (a GPU's includes the round's copies over PCIe).
type Calibration struct {
	Threads int          `json:"threads"`
	Profile plan.Profile `json:"profile"`
	// DraftStep is one step of the model's DGF draft (a tree level), by
	// device: "cpu" or "cuda:0".
	DraftStep map[string]time.Duration `json:"draft_step"`
	// Plain is decoding as a run does it, tokens/s: greedy generation
	// through the engine, sampling and bookkeeping included, which on a
	// small model cost a good share of a step.
	Plain float64 `json:"plain_tokens_per_s"`
	// PlainLow and PlainHigh are the slowest and fastest of Plain's runs:
	// the spread a prediction's range carries.
	PlainLow  float64 `json:"plain_low_tokens_per_s"`
	PlainHigh float64 `json:"plain_high_tokens_per_s"`
	// Drafted, DraftedLow and DraftedHigh are generation's speed with a
	// new draft on the CPU and the planner, tokens/s (median, slowest,
	// fastest): the low end of a prediction before the draft learns.
	Drafted     float64   `json:"drafted_tokens_per_s"`
	DraftedLow  float64   `json:"drafted_low_tokens_per_s"`
	DraftedHigh float64   `json:"drafted_high_tokens_per_s"`
	At          time.Time `json:"at"`
}

// calibrationKey names a calibration: the machine's CPU, the kernels'
// level and build, the threads and the model. A new build of the same
// level may be faster, and is calibrated anew.
func calibrationKey(m *Model, threads int) string {
	k := cpu.DefaultKernels()
	key := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%s|%d|%s|%d", cpuid.CPU.BrandName, m.Kernels, k.Build, threads, m.Fingerprint, calibrationFormat))
	return hex.EncodeToString(key[:12])
}

// calibrationFormat changes when what a calibration measures does: one
// kept before (a greedy plain speed, no spread, no drafted speed) is
// measured anew.
const calibrationFormat = 3

// CachedCalibration is the calibration the store keeps of m at threads.
func CachedCalibration(st *store.Store, m *Model, threads int) (Calibration, bool) {
	var c Calibration
	if st == nil {
		return c, false
	}
	b, err := os.ReadFile(st.ProfilePath(calibrationKey(m, threads)))
	if err != nil || json.Unmarshal(b, &c) != nil || c.Profile.Decode <= 0 || len(c.Profile.Verify) == 0 || c.PlainLow > c.Plain || c.PlainHigh < c.Plain {
		return Calibration{}, false
	}
	return c, true
}

func saveCalibration(st *store.Store, m *Model, c Calibration) error {
	return st.WriteFile(st.ProfilePath(calibrationKey(m, c.Threads)), false, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(c)
	})
}

// planner is the planner of a runner: from this machine's calibration of
// the model when there is one, else one that learns the costs from the
// run itself, so that nothing is measured before the first token.
func (r *Runner) planner() *plan.Planner {
	if c, ok := CachedCalibration(r.store, r.model, r.per); ok {
		return plan.New(c.Profile, r.opts.Tree.TopK)
	}
	return plan.NewProvisional(r.opts.Tree.TopK)
}
