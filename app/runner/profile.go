package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/cpuid/v2"

	"dovetail/cpu"
	"dovetail/engine"
)

// profileSizes are the tree sizes whose verification cost is profiled.
var profileSizes = []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}

// planner returns a planner for target: its profile (T_T and T_V(n)) comes
// from the store when this machine profiled this model with this build of
// these kernels and threads before, else it is measured now (about a
// second on small models) and kept.
func (r *Runner) planner(target *cpu.Target, threads int) (*engine.Planner, error) {
	// The kernels' build is in the key: a new build of the same level may
	// be faster, and its profile has to be measured anew.
	key := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%s|%d|%s", cpuid.CPU.BrandName, r.model.Kernels, target.KernelBuild(),
		threads, r.model.Fingerprint))
	var path string
	if r.store != nil {
		path = r.store.ProfilePath(hex.EncodeToString(key[:12]))
	}
	var prof engine.Profile
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &prof) == nil && prof.Decode > 0 && len(prof.Verify) > 0 {
		return engine.NewPlanner(prof, r.opts.Tree.TopK), nil
	}
	prompt := min(32, target.Context()/4)
	var sizes []int
	for _, n := range profileSizes {
		if prompt+n <= target.Context() {
			sizes = append(sizes, n)
		}
	}
	prof, err := engine.ProfileTarget(target, prompt, min(32, target.Context()-prompt), sizes, 5)
	if err != nil {
		return nil, fmt.Errorf("profiling the target for the planner: %w", err)
	}
	if path != "" {
		err := r.store.WriteFile(path, false, func(w io.Writer) error { return json.NewEncoder(w).Encode(prof) })
		if err != nil {
			r.notify(Notice{Warning: true, Text: fmt.Sprintf("the target's profile is not kept: %v", err)})
		}
	}
	return engine.NewPlanner(prof, r.opts.Tree.TopK), nil
}
