package dgf

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/device/cuda/cudatest"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// A draft on CUDA drafts as on the host from the same weights: a prefix,
// then two levels of a tree (train's TestCUDATrainingMatchesHost trains
// them side by side). The same for EAGLE-1 and EAGLE-3 drafts, with
// Llama 3.1's RoPE frequency factors where they have them.
func TestCUDADraftMatchesHost(t *testing.T) {
	dev := cudatest.Device(t)
	for _, c := range []draft.Config{dgftest.TinyConfig, eagle1Tiny, eagle3Tiny} {
		t.Run(c.Kind.String(), func(t *testing.T) {
			ref := newDraft32(t, c, 17)
			if c.Kind != draft.DGF {
				ref = newEagle(t, c, 17)
			}
			checkCUDADraft(t, dev, ref)
		})
	}
}

func checkCUDADraft(t *testing.T, dev device.Device, ref *Draft) {
	const tol = 1e-3
	c := ref.C
	d, err := ref.Clone(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free()
	rng := rand.New(rand.NewPCG(17, 17))
	w := dgftest.RandWindow(rng, 12, c.FeatureIn(), c.Vocab, 1)
	sd, sr := d.NewSequence(0), ref.NewSequence(0)
	defer sd.Free()
	defer sr.Free()
	lg, pr, err := sd.Forward(w.Features[:12], w.Tokens[1:13])
	if err != nil {
		t.Fatal(err)
	}
	lgR, prR, err := sr.Forward(w.Features[:12], w.Tokens[1:13])
	if err != nil {
		t.Fatal(err)
	}
	dgftest.CloseTo(t, "prefix logits", lg, lgR, tol)
	dgftest.CloseTo(t, "prefix feature", pr, prR, tol)
	// Both sequences read the host's predictions as the nodes' features,
	// so that their inputs are the same.
	preds := [][]float32{slices.Clone(prR)}
	for level, parents := range [][]int{{-1, -1, -1}, {0, 0, 2, 1}} {
		var feats [][]float32
		var toks []int
		for _, par := range parents {
			feats = append(feats, preds[par+1])
			toks = append(toks, rng.IntN(c.Vocab))
		}
		lgs, prs, err := sd.Extend(feats, toks, parents)
		if err != nil {
			t.Fatal(err)
		}
		lgsR, prsR, err := sr.Extend(feats, toks, parents)
		if err != nil {
			t.Fatal(err)
		}
		for i := range parents {
			dgftest.CloseTo(t, fmt.Sprintf("level %d node %d logits", level, i), lgs[i], lgsR[i], tol)
			dgftest.CloseTo(t, fmt.Sprintf("level %d node %d feature", level, i), prs[i], prsR[i], tol)
			if level == 0 {
				preds = append(preds, slices.Clone(prsR[i]))
			}
		}
	}
}

// A clone onto another stream of the same GPU (the trainer's device)
// shares the frozen embeddings and LM head instead of uploading them
// again, and drafts as the original does.
func TestCUDACloneSharesFrozen(t *testing.T) {
	dev := cudatest.Device(t)
	other, err := cudatest.Open()
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDraft32(t, dgftest.TinyConfig, 5).Clone(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free()
	c, err := d.Clone(other)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	if c.Head != d.Head || c.Embd != d.Embd {
		t.Error("the clone holds its own copies of the frozen matrices")
	}
	w := dgftest.RandWindow(rand.New(rand.NewPCG(5, 5)), 8, dgftest.TinyConfig.Hidden, dgftest.TinyConfig.Vocab, 1)
	sd, sc := d.NewSequence(0), c.NewSequence(0)
	defer sd.Free()
	defer sc.Free()
	lg, _, err := sd.Forward(w.Features[:8], w.Tokens[1:9])
	if err != nil {
		t.Fatal(err)
	}
	lg = slices.Clone(lg)
	lgC, _, err := sc.Forward(w.Features[:8], w.Tokens[1:9])
	if err != nil {
		t.Fatal(err)
	}
	dgftest.CloseTo(t, "clone's logits", lgC, lg, 1e-6)
}

// An int8 draft's tree levels on CUDA replay as graphs after their first
// round, and draft bit for bit what the same draft drafts launching each
// kernel on its own (a device opened with DOVETAIL_CUDA_GRAPHS=off).
func TestCUDADraftGraphs(t *testing.T) {
	dev := cudatest.Device(t)
	t.Setenv("DOVETAIL_CUDA_GRAPHS", "off")
	plain, err := cudatest.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	c := freezeConfig
	ref := newDraft32(t, c, 5)
	var seqs [2]*Sequence
	for i, dv := range []device.Device{dev, plain} {
		d, err := ref.Clone(dv)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free()
		if err := d.FreezeForDrafting(); err != nil {
			t.Fatal(err)
		}
		seqs[i] = d.NewSequence(0)
		defer seqs[i].Free()
	}
	rng := rand.New(rand.NewPCG(5, 5))
	w := dgftest.RandWindow(rng, 40, c.FeatureIn(), c.Vocab, 1)
	before, _ := cuda.GraphLaunches(dev)
	const rounds = 4
	for r := range rounds {
		// A round: one committed position, then two levels of a tree.
		var pred, logits [2][]float32
		for i, s := range seqs {
			if err := s.Truncate(r); err != nil {
				t.Fatal(err)
			}
			lg, pr, err := s.Forward(w.Features[r:r+1], w.Tokens[r+1:r+2])
			if err != nil {
				t.Fatal(err)
			}
			logits[i], pred[i] = slices.Clone(lg), slices.Clone(pr)
		}
		if !slices.Equal(pred[0], pred[1]) || !slices.Equal(logits[0], logits[1]) {
			t.Fatalf("round %d: the position's outputs differ with and without graphs", r)
		}
		for level, parents := range [][]int{{-1, -1}, {0, 0, 1}} {
			feats := make([][]float32, len(parents))
			toks := make([]int, len(parents))
			for j := range parents {
				feats[j], toks[j] = pred[0], (r*7+level*3+j)%c.Vocab
			}
			var got [2][][]float32
			for i, s := range seqs {
				lgs, _, err := s.Extend(feats, toks, parents)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range lgs {
					got[i] = append(got[i], slices.Clone(l))
				}
			}
			for j := range got[0] {
				if !slices.Equal(got[0][j], got[1][j]) {
					t.Fatalf("round %d, level %d, node %d: logits differ with and without graphs", r, level, j)
				}
			}
		}
	}
	after, _ := cuda.GraphLaunches(dev)
	// Three shapes a round (a position, a level of 2, one of 3), each
	// recorded in the first round and replayed in the others.
	if got, want := after-before, 3*(rounds-1); got < want {
		t.Errorf("%d rounds launched %d graphs, want at least %d", rounds, got, want)
	}
	if n, _ := cuda.GraphLaunches(plain); n != 0 {
		t.Errorf("the device with graphs off launched %d", n)
	}
}
