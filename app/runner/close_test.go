package runner

import (
	"strconv"
	"testing"
	"time"

	"dovetail/app/runner/store"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
	"dovetail/models/draft"
)

// Close with the trainer in the middle of a long step returns within the
// bound, and the draft it saves is the version last published (the live
// draft's newest), not the shadow trained since.
func TestCloseMidStepSavesLastPublished(t *testing.T) {
	m := open(t, "tinystories656K-Q8_0.gguf")
	o := options(t)
	o.Adapt, o.Plan, o.Greedy, o.Tree = quickAdapt(), false, true, tree.Laptop
	o.Adapt.Engine.MemoryTokens = 0
	// Steps of 1024 positions, publishing after every second one.
	o.Adapt.Engine.Window, o.Adapt.Engine.Batch = 32, 32
	r := start(t, m, o)
	adaptUntilPublished(t, r)
	runs := func() int { st, _ := r.Adaptation(); return st.Runs }
	// A run ended, and the next one under way: its steps take long.
	for n := runs(); runs() == n; {
		greedy(t, r, "Once upon a time, a little girl", 48)
	}
	for st, _ := r.Adaptation(); !st.Training; st, _ = r.Adaptation() {
		greedy(t, r, "Once upon a time, a little girl", 48)
	}
	begin := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	st, _ := r.Adaptation() // no publication after Close began
	published := st.Version
	t.Logf("closed in %v, version %d published", took, published)
	if took > adapt.StopWait+2*time.Second {
		t.Errorf("Close took %v with a training step under way", took)
	}
	ck, err := draft.Load(o.Store.DraftPath(m.Fingerprint))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := strconv.Atoi(ck.Meta[store.MetaVersion]); v != published {
		t.Errorf("saved version %d, the last published is %d", v, published)
	}
}
