package synth

import (
	"path/filepath"
	"strings"
	"testing"

	"dovetail/models"
	"dovetail/models/gguf"
	"dovetail/models/tokenizer"
	"dovetail/quant"
)

func TestBuildLoads(t *testing.T) {
	sh, err := ParseShape("dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300,ctx=128")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.F16} {
		w, err := Build(sh, Options{Type: typ, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		m, err := models.LoadLlama(path)
		if err != nil {
			t.Fatal(err)
		}
		c := m.Config
		if c.Hidden != 64 || c.Layers != 2 || c.KVHeads != 2 || c.FFN != 96 || c.Vocab != 300 || m.Layers[0].Q.Type != typ {
			t.Errorf("%v: config %+v, Q type %v", typ, c, m.Layers[0].Q.Type)
		}
		// ffn_down rows are 96 wide: not whole Q4_K blocks, so types fall back.
		if got := m.Layers[0].Down.Type; got.BlockSize() > 96 {
			t.Errorf("ffn_down type %v", got)
		}
		if _, err := tokenizer.New(m.File); err != nil {
			t.Errorf("stand-in vocabulary: %v", err)
		}
		m.Close()
	}
}

func TestCopiesVocab(t *testing.T) {
	v, err := gguf.Open("../../testdata/golden/tokenizer/ggml-vocab-llama-spm.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	sh := Shape{Dim: 256, Layers: 1, Heads: 2, KVHeads: 2, FFN: 256, Vocab: 32000, Ctx: 64}
	w, err := Build(sh, Options{Type: quant.Q4_K, Vocab: v})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	w.WriteFile(path)
	f, _ := gguf.Open(path)
	defer f.Close()
	if ti, _ := f.Tensor("blk.0.attn_q.weight"); ti.Type != quant.Q4_K {
		t.Errorf("attn_q is %v, want Q4_K", ti.Type)
	}
	tok, err := tokenizer.New(f)
	if err != nil || tok.VocabSize() != 32000 {
		t.Fatalf("vocabulary: %v", err)
	}
	if got := tok.Encode("Hello world", false, false); len(got) == 0 {
		t.Error("copied vocabulary does not tokenize")
	}
	if sh.Vocab = 100; true {
		if _, err := Build(sh, Options{Type: quant.Q8_0, Vocab: v}); err == nil {
			t.Error("a vocab GGUF of another size was accepted")
		}
	}
}

func TestParseShape(t *testing.T) {
	if sh, err := ParseShape("stories110M"); err != nil || sh.Dim != 768 || sh.Params() < 130e6 || sh.Params() > 140e6 {
		t.Errorf("stories110M: %+v, %d params, %v", sh, sh.Params(), err)
	}
	for _, bad := range []string{"", "huge", "dim=768", "dim=100,layers=1,heads=3,ffn=10", "dim=x,layers=1,heads=1,ffn=1"} {
		if _, err := ParseShape(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Bytes is the size of what Build writes, counted before anything is
// allocated; a shape too large is refused with its size, and one past
// 2^64 bytes does not wrap round to a small one.
func TestBytes(t *testing.T) {
	for _, c := range []struct {
		shape string
		typ   quant.Type
	}{
		{"dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300,ctx=128", quant.Q4_K}, // ffn_down falls back
		{"dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300,ctx=128", quant.F32},
		{"dim=256,layers=1,heads=2,ffn=256,vocab=300", quant.IQ4_XS},
	} {
		sh, _ := ParseShape(c.shape)
		w, err := Build(sh, Options{Type: c.typ})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		w.WriteFile(path)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, ti := range f.Tensors {
			sum += ti.Size
		}
		f.Close()
		if got, ok := sh.Bytes(c.typ); !ok || got != sum {
			t.Errorf("%s %v: Bytes %d, %v; the file's tensors hold %d", c.shape, c.typ, got, ok, sum)
		}
	}
	sh, _ := ParseShape("dim=1000000,layers=1000,heads=1000,ffn=4000000")
	if _, err := Build(sh, Options{Type: quant.Q8_0}); err == nil || !strings.Contains(err.Error(), "dim=1000000,layers=1000") || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a model of 10^16 parameters: %v", err)
	}
	sh, _ = ParseShape("dim=4611686018427387904,layers=4611686018427387904,heads=1,ffn=4611686018427387904")
	if n, ok := sh.Bytes(quant.F32); ok {
		t.Errorf("a shape past 2^64 bytes counted as %d", n)
	}
	if _, err := Build(sh, Options{Type: quant.F32}); err == nil || !strings.Contains(err.Error(), "more than 2^64 bytes") {
		t.Errorf("a shape past 2^64 bytes: %v", err)
	}
}
