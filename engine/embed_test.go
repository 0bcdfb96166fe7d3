package engine_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/engine/enginetest"
)

// onlyTarget hides a target's Hidden: Embed then pools ForwardFeatures'.
type onlyTarget struct{ engine.Target }

// The CPU target's Hidden (no output layer) and a plain forward pass give
// the same embedding, of unit length, however often it is asked.
func TestEmbedHiddenEqualsForward(t *testing.T) {
	pool := cpu.NewPool(2)
	defer pool.Close()
	tg := cpu.NewTarget(enginetest.Load(t, "stories260K-f32.gguf"), pool, 0)
	tokens := []int{1, 403, 407, 261, 378}
	a, err := engine.Embed(context.Background(), tg, tokens)
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.Embed(context.Background(), onlyTarget{tg}, tokens)
	if err != nil {
		t.Fatal(err)
	}
	again, err := engine.Embed(context.Background(), tg, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) || !slices.Equal(a, again) {
		t.Errorf("Hidden's embedding %v\nforward's %v\nagain %v", a[:4], b[:4], again[:4])
	}
	var ss float64
	for _, x := range a {
		ss += float64(x) * float64(x)
	}
	if len(a) != 64 || math.Abs(ss-1) > 1e-6 {
		t.Errorf("%d dimensions, squared norm %v", len(a), ss)
	}
}

func TestEmbedRefuses(t *testing.T) {
	m := enginetest.NewMarkov(8, 1, 1)
	m.Ctx = 4
	ctx := context.Background()
	if _, err := engine.Embed(ctx, m, nil); err == nil {
		t.Error("no tokens embedded")
	}
	if _, err := engine.Embed(ctx, m, []int{1, 2, 3, 4, 5}); !errors.Is(err, engine.ErrContextFull) {
		t.Errorf("more than the context: %v", err)
	}
	if _, err := engine.Embed(ctx, m, []int{1, 8}); err == nil {
		t.Error("a token outside the vocabulary embedded")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := engine.Embed(cancelled, m, []int{1, 2}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if v, err := engine.Embed(ctx, m, []int{1, 2, 3, 4}); err != nil || len(v) != 1 || v[0] != 1 {
		t.Errorf("the whole context: %v, %v", v, err)
	}
}

func TestL2Normalize(t *testing.T) {
	v := []float32{3, 0, -4}
	if err := engine.L2Normalize(v); err != nil || !slices.Equal(v, []float32{0.6, 0, -0.8}) {
		t.Errorf("[3 0 -4] → %v, %v", v, err)
	}
	zero := []float32{0, 0}
	if err := engine.L2Normalize(zero); err != nil || !slices.Equal(zero, []float32{0, 0}) {
		t.Errorf("zero → %v, %v", zero, err)
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		if err := engine.L2Normalize([]float32{1, bad}); !errors.Is(err, engine.ErrNotFinite) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
