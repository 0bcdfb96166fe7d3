package cli

import (
	"errors"
	"io"
	"strings"
	"testing"

	"dovetail/cpu"
	"dovetail/gpu"
	"dovetail/models/draft"
)

// --device picks the host for small drafts under auto and for cpu, and
// names what was wrong with a bad value. On a machine without a GPU,
// cuda is an error and auto falls back to the host whatever the size.
func TestDraftDevices(t *testing.T) {
	pool := cpu.NewPool(2)
	defer pool.Close()
	small := draft.Config{Hidden: 64, Vocab: 4096}
	large := draft.Config{Hidden: 2048, Vocab: 32000}
	for _, spec := range []string{"cpu", "auto"} {
		d, tr, err := draftDevices(spec, small, pool, 1, io.Discard)
		if err != nil {
			t.Fatalf("--device %s: %v", spec, err)
		}
		if !strings.HasPrefix(d.Name(), "host") || !strings.HasPrefix(tr.Name(), "host (1 threads") {
			t.Errorf("--device %s: drafter on %s, trainer on %s, want the host", spec, d.Name(), tr.Name())
		}
	}
	for _, spec := range []string{"gpu", "cpu:1", "auto:0", "cuda:x", "cuda:-1", ""} {
		if _, _, err := draftDevices(spec, small, pool, 1, io.Discard); err == nil || !strings.Contains(err.Error(), "--device") {
			t.Errorf("--device %q: error %v, want one naming the flag", spec, err)
		}
	}
	if _, err := gpu.NewCUDA(0); errors.Is(err, gpu.ErrNoCUDA) {
		if _, _, err := draftDevices("cuda", large, pool, 1, io.Discard); !errors.Is(err, gpu.ErrNoCUDA) {
			t.Errorf("--device cuda without a GPU: error %v", err)
		}
		d, _, err := draftDevices("auto", large, pool, 1, io.Discard)
		if err != nil || !strings.HasPrefix(d.Name(), "host") {
			t.Errorf("--device auto without a GPU: %v, %v", d, err)
		}
	}
}
