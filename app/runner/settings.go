package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"time"

	"dovetail/app/runner/store"
	"dovetail/engine/tree"
)

// ModelSettings are the settings setup chose for a model, which run, serve
// and the desktop app start from (what the user gives overrides them).
type ModelSettings struct {
	Name      string      `json:"name"`
	Path      string      `json:"path,omitempty"`
	Threads   int         `json:"threads"`
	Ctx       int         `json:"ctx"`
	Draft     string      `json:"draft"`
	Device    string      `json:"device"`
	GPULayers int         `json:"gpu_layers"`
	Tree      tree.Params `json:"tree"`
	Plan      bool        `json:"plan"`
	Predicted Prediction  `json:"predicted"`
	SavedAt   time.Time   `json:"saved_at"`
}

// Settings is the settings file: each model's, by fingerprint.
type Settings struct {
	Version int                      `json:"version"`
	Models  map[string]ModelSettings `json:"models"`
}

// SettingsFor are the settings a fit chose.
func SettingsFor(f Fit) ModelSettings {
	p := f.Placement
	draft := "auto"
	if p.DraftDevice == "none" {
		draft = "none"
	}
	return ModelSettings{Name: f.Model, Path: f.Path, Threads: p.Threads, Ctx: p.Ctx, Draft: draft, Device: p.Device,
		GPULayers: p.GPULayers, Tree: p.Tree, Plan: true, Predicted: f.Predicted, SavedAt: time.Now().UTC()}
}

// LoadSettings reads the settings file; none is empty settings. A file
// that does not parse is an error (and is never overwritten by
// SaveSettings: it is set aside first).
func LoadSettings(st *store.Store) (Settings, error) {
	s := Settings{Version: 1, Models: map[string]ModelSettings{}}
	data, err := os.ReadFile(st.SettingsPath())
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil {
		return Settings{Version: 1, Models: map[string]ModelSettings{}}, fmt.Errorf("settings %s: %w", st.SettingsPath(), err)
	}
	if s.Models == nil {
		s.Models = map[string]ModelSettings{}
	}
	return s, nil
}

// SaveSettings writes the settings of the models given (by fingerprint)
// into the settings file, keeping the others'. A file there that does
// not parse is set aside as .corrupt.
func SaveSettings(st *store.Store, models map[string]ModelSettings) error {
	s, err := LoadSettings(st)
	if err != nil {
		if _, err := st.SetAside(st.SettingsPath()); err != nil {
			return err
		}
	}
	for fp, ms := range models {
		s.Models[fp] = ms
	}
	return st.WriteFile(st.SettingsPath(), false, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	})
}

// Apply sets in o what ms holds, except the options the user gave
// (given reports them by name: threads, ctx, draft, device, tree, plan),
// and returns what it set, as "name value" strings. Threads beyond this
// machine's (settings made elsewhere) are not applied.
func (ms ModelSettings) Apply(o *Options, given func(option string) bool) []string {
	var used []string
	set := func(name string, ok bool, apply func(), shown any) {
		if ok && !given(name) {
			apply()
			used = append(used, fmt.Sprintf("%s %v", name, shown))
		}
	}
	set("threads", ms.Threads > 0 && ms.Threads <= runtime.NumCPU(), func() { o.Threads = ms.Threads }, ms.Threads)
	set("ctx", ms.Ctx > 0, func() { o.Ctx = ms.Ctx }, ms.Ctx)
	dr, derr := ParseDraft(ms.Draft)
	set("draft", ms.Draft != "" && derr == nil, func() { o.Draft = dr }, ms.Draft)
	dv, verr := ParseDevice(ms.Device)
	set("device", ms.Device != "" && verr == nil, func() { o.Device = dv }, ms.Device)
	// 0 is what setup saved before layers could go to a GPU: auto stands.
	set("gpu layers", ms.GPULayers > 0, func() { o.GPULayers = ms.GPULayers }, ms.GPULayers)
	set("tree", ms.Tree.Validate() == nil, func() { o.Tree = ms.Tree },
		fmt.Sprintf("k %d, depth %d, %d tokens", ms.Tree.TopK, ms.Tree.Depth, ms.Tree.Tokens))
	set("plan", true, func() { o.Plan = ms.Plan }, ms.Plan)
	if len(used) > 0 {
		o.Predicted = ms.Predicted.WithDraft
	}
	return used
}
