package eagle

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/eagle/eagletest"
)

// tiny is a target small enough to write checkpoints for in a test.
func tiny() models.Config {
	return models.Config{Arch: "llama", Name: "tiny.gguf", Hidden: 32, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 8,
		FFN: 48, Vocab: 100, ContextLength: 256, RMSEps: 1e-5, RopeTheta: 10000, RopeDim: 8, RopeScale: 1}
}

func write(t *testing.T, s eagletest.Spec) string {
	t.Helper()
	if s.Target.Hidden == 0 {
		s.Target = tiny()
	}
	dir := filepath.Join(t.TempDir(), "draft")
	if err := eagletest.Write(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// unpermute undoes permuteRoPE: row h·d + i·d/2 + j of the result is row
// h·d + 2j + i of w.
func unpermute(w []float32, rows, cols, heads int) []float32 {
	out := make([]float32, len(w))
	d := rows / heads
	for h := range heads {
		for j := range d / 2 {
			for i := range 2 {
				copy(out[(h*d+i*d/2+j)*cols:][:cols], w[(h*d+2*j+i)*cols:][:cols])
			}
		}
	}
	return out
}

func TestLoadRoundTrip(t *testing.T) {
	for _, s := range []eagletest.Spec{
		{Kind: draft.EAGLE1, FCBias: true},
		{Kind: draft.EAGLE1, Layers: 2, DType: "F16", Shards: 3, Embed: true},
		{Kind: draft.EAGLE1, DType: "BF16"},
		{Kind: draft.EAGLE3},
		{Kind: draft.EAGLE3, DType: "BF16", DraftVocab: 40, Embed: true, Shards: 2},
		{Kind: draft.EAGLE3, DType: "F16", DraftVocab: 60, VLLM: true},
		{Kind: draft.EAGLE1, FCBias: true, DType: "F16", PyTorch: true},
		{Kind: draft.EAGLE3, DType: "BF16", DraftVocab: 40, Embed: true, Shards: 2, PyTorch: true},
	} {
		name := fmt.Sprintf("%v-%s-layers%d-shards%d-vocab%d-vllm%v-pytorch%v", s.Kind, s.DType, s.Layers, s.Shards, s.DraftVocab, s.VLLM, s.PyTorch)
		t.Run(name, func(t *testing.T) {
			s.Seed = 7
			dir := write(t, s)
			ck, err := Load(dir, tiny())
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			checkLoaded(t, ck, s)
		})
	}
}

// checkLoaded compares every loaded tensor with the file's values, Q and K
// through the inverse permutation.
func checkLoaded(t *testing.T, ck *Checkpoint, s eagletest.Spec) {
	c := ck.Config
	if c.Kind != s.Kind || c.FCBias != s.FCBias || c.Blocks != max(s.Layers, 1) || c.Context != 256 {
		t.Fatalf("config %+v", c)
	}
	files, err := openWeights(ck.Dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	names, _ := normalize(files.Tensors)
	if len(ck.Tensors) != len(c.Shapes()) {
		t.Errorf("%d tensors, want %d", len(ck.Tensors), len(c.Shapes()))
	}
	for _, sh := range c.Shapes() {
		want, err := names[hfName(sh.Name)].Float32()
		if err != nil {
			t.Fatal(err)
		}
		got := ck.Tensors[sh.Name]
		if b, ok := qk(c, sh.Name); ok {
			heads := c.Heads
			if sh.Name == draft.BlockTensor(b, "attn_k.weight") {
				heads = c.KVHeads
			}
			if slices.Equal(got, want) {
				t.Errorf("%s: not permuted", sh.Name)
			}
			got = unpermute(got, sh.Rows, sh.Cols, heads)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: values differ from the file's", sh.Name)
		}
	}
	if (ck.Embed != nil) != s.Embed || (ck.Embed != nil && (ck.Embed.Rows != 100 || ck.Embed.Cols != 32)) {
		t.Errorf("embed %+v", ck.Embed)
	}
	if s.DraftVocab == 0 && ck.D2T != nil || s.DraftVocab > 0 && len(ck.D2T) != s.DraftVocab {
		t.Errorf("d2t of %d", len(ck.D2T))
	}
	if d, ok := names["d2t"]; ok {
		off, _ := d.Int64s()
		for i, o := range off {
			if ck.D2T[i] != int32(int64(i)+o) {
				t.Fatalf("d2t[%d] = %d, want %d", i, ck.D2T[i], int64(i)+o)
			}
		}
	}
}

// qk says whether name is a Q or K projection, and of which block.
func qk(c draft.Config, name string) (int, bool) {
	for b := range c.Blocks {
		if name == draft.BlockTensor(b, "attn_q.weight") || name == draft.BlockTensor(b, "attn_k.weight") {
			return b, true
		}
	}
	return 0, false
}

func TestPermuteByHand(t *testing.T) {
	// Two heads of dimension 4, two columns: HF pairs rows (0,2) and (1,3)
	// of each head; llama.cpp wants them adjacent.
	w := []float32{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5}
	want := []float32{0, 0.5, 2, 2.5, 1, 1.5, 3, 3.5, 4, 4.5, 6, 6.5, 5, 5.5, 7, 7.5}
	if got := permuteRoPE(w, 8, 2, 2); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Head dimension 6: rows 0..5 become 0,3,1,4,2,5.
	w6 := []float32{0, 1, 2, 3, 4, 5}
	if got := permuteRoPE(w6, 6, 1, 1); !slices.Equal(got, []float32{0, 3, 1, 4, 2, 5}) {
		t.Errorf("d=6: got %v", got)
	}
}
