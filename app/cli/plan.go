package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/cpuid/v2"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/models/draft"
)

// profileSizes are the tree sizes whose verification cost is profiled.
var profileSizes = []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}

// plannerFor returns a planner for target: its profile (T_T and T_V(n))
// comes from the cache when this machine profiled this model with this
// build of these kernels and threads before, else it is measured now
// (about a second on small models) and cached.
func plannerFor(target *cpu.Target, lm *loaded, kernels string, threads, topK int, warn io.Writer) (*engine.Planner, error) {
	// The kernels' build is in the key: a new build of the same level may
	// be faster, and its profile has to be measured anew.
	key := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%s|%d|%s", cpuid.CPU.BrandName, kernels, target.KernelBuild(), threads, draft.Fingerprint(lm.Model.File)))
	var path string
	if dir, err := os.UserCacheDir(); err == nil {
		path = filepath.Join(dir, "dovetail", "profiles", hex.EncodeToString(key[:12])+".json")
	}
	var prof engine.Profile
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &prof) == nil && prof.Decode > 0 && len(prof.Verify) > 0 {
		return engine.NewPlanner(prof, topK), nil
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
		b, _ := json.Marshal(prof)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, b, 0o644); err == nil {
				err = os.Rename(tmp, path)
			}
			if err != nil {
				fmt.Fprintf(warn, "warning: the target's profile is not cached: %v\n", err)
			}
		}
	}
	return engine.NewPlanner(prof, topK), nil
}
