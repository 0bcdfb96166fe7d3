package desktop

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"

	"dovetail/app/runner/store"
	"dovetail/engine"
)

// Prefs are the app's own settings, beside the per-model settings setup
// saves.
type Prefs struct {
	APIServer  bool   `json:"api_server"`
	APIAddress string `json:"api_address"`
	Threads    int    `json:"threads,omitempty"`    // 0: the model's settings
	Ctx        int    `json:"ctx,omitempty"`        // 0: the model's settings
	GPULayers  string `json:"gpu_layers,omitempty"` // "": the model's settings, else as --gpu-layers
	Highlight  bool   `json:"highlight"`
	MemoryOff  bool   `json:"memory_off"`
	Model      string `json:"model,omitempty"`  // the last model's path ("": the embedded one)
	Folder     string `json:"folder,omitempty"` // read for older settings; Opened holds it now
	// Opened are the model files and folders the user opened (Open…, a
	// typed path, a drop, setup's Add), newest first: the picker offers
	// them after a restart.
	Opened []string `json:"opened,omitempty"`
	// Width and Height are the window's size when it last closed (0: the
	// default). fyne gives no window position to read or set.
	Width  float32 `json:"window_width,omitempty"`
	Height float32 `json:"window_height,omitempty"`
	Theme  string  `json:"theme,omitempty"` // "light", "dark" or "" (follow the system)
	// Presets are each model's system prompt and sampling, by fingerprint.
	Presets map[string]Preset `json:"presets,omitempty"`
	// StopAtLimit refuses a conversation that outgrows the context rather
	// than leaving its oldest messages out.
	StopAtLimit bool `json:"stop_at_limit,omitempty"`
}

// Preset is a model's system prompt and sampling.
type Preset struct {
	System        string  `json:"system"`
	Temperature   float32 `json:"temperature"`
	TopK          int     `json:"top_k"`
	TopP          float32 `json:"top_p"`
	MinP          float32 `json:"min_p"`
	RepeatPenalty float32 `json:"repeat_penalty"`
	MaxTokens     int     `json:"max_tokens"` // 0: to the end of the context
}

// params are the preset's sampling with seed.
func (p Preset) params(seed uint64) engine.SamplerParams {
	return engine.SamplerParams{Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP, MinP: p.MinP, RepeatPenalty: p.RepeatPenalty, Seed: seed}
}

// defaultPreset is what run does by default.
var defaultPreset = Preset{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1}

func defaultPrefs() Prefs {
	return Prefs{APIAddress: "127.0.0.1:11435", Highlight: true, Presets: map[string]Preset{}}
}

// loadPrefs reads the app's settings; none, or a damaged file (set
// aside), gives the defaults.
func loadPrefs(st *store.Store) Prefs {
	p := defaultPrefs()
	b, err := os.ReadFile(st.AppSettingsPath())
	if errors.Is(err, fs.ErrNotExist) {
		return p
	}
	if err != nil || json.Unmarshal(b, &p) != nil {
		st.SetAside(st.AppSettingsPath())
		return defaultPrefs()
	}
	if p.Presets == nil {
		p.Presets = map[string]Preset{}
	}
	if p.APIAddress == "" {
		p.APIAddress = defaultPrefs().APIAddress
	}
	return p
}

func savePrefs(st *store.Store, p Prefs) error {
	return st.WriteFile(st.AppSettingsPath(), false, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	})
}
