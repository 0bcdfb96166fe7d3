package runner

import (
	"strings"
	"testing"
)

// Each --draft and --device value parses to its choice and back to the
// value a flag takes; a value no drafter or device answers to, the empty
// one included, is an error that names it and the choices.
func TestParseChoices(t *testing.T) {
	for spec, want := range map[string]string{"auto": "auto", "none": "none", "ngram": "ngram",
		"scratch": "scratch", "model:m.gguf": "model:m.gguf", "dgf:/a/b:c.gguf": "dgf:/a/b:c.gguf",
		"eagle:/d/EAGLE3-8B": "eagle:/d/EAGLE3-8B", "eagle3:/d/x": "eagle:/d/x"} {
		d, err := ParseDraft(spec)
		if err != nil || d.String() != want {
			t.Errorf("draft %q: %v, %v; want %s", spec, d, err, want)
		}
	}
	for _, bad := range []string{"", "model", "dgf:", "eagle", "eagle3:"} {
		if d, err := ParseDraft(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "auto") && !strings.Contains(err.Error(), "needs a path") {
			t.Errorf("draft %q: %v, %v", bad, d, err)
		}
	}
	for spec, want := range map[string]DeviceChoice{"auto": {}, "cpu": {Kind: DeviceCPU},
		"cuda": {Kind: DeviceCUDA}, "cuda:1": {Kind: DeviceCUDA, Ordinal: 1}} {
		d, err := ParseDevice(spec)
		if err != nil || d != want {
			t.Errorf("device %q: %+v, %v; want %+v", spec, d, err, want)
		}
		if back, err := ParseDevice(d.String()); err != nil || back != d {
			t.Errorf("device %q: %s parses to %+v, %v", spec, d, back, err)
		}
	}
	for _, bad := range []string{"", "gpu", "cuda:-1", "cuda:x", "cpu:0", "auto:1"} {
		if d, err := ParseDevice(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("device %q: %+v, %v", bad, d, err)
		}
	}
}
