// Package synth writes random-weight llama models of realistic shapes:
// their speed is real, their text is not. They are how Dovetail measures
// itself (and llama.cpp, which loads the same files) on shapes no small
// real model has.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"dovetail/models/gguf"
	"dovetail/quant"
)

// Shape is a llama model's dimensions.
type Shape struct {
	Dim, Layers, Heads, KVHeads, FFN, Vocab, Ctx int
}

// Shapes are the named presets.
var Shapes = map[string]Shape{
	"stories110M":    {Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFN: 2048, Vocab: 32000, Ctx: 1024},
	"tinyllama-1.1b": {Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, Ctx: 2048},
	"llama2-7b":      {Dim: 4096, Layers: 32, Heads: 32, KVHeads: 32, FFN: 11008, Vocab: 32000, Ctx: 4096},
}

// ParseShape reads a preset name or "dim=768,layers=12,heads=12,kv=12,
// ffn=2048,vocab=32000,ctx=1024" (kv, vocab and ctx optional).
func ParseShape(s string) (Shape, error) {
	if sh, ok := Shapes[s]; ok {
		return sh, nil
	}
	sh := Shape{Vocab: 32000, Ctx: 2048}
	fields := map[string]*int{"dim": &sh.Dim, "layers": &sh.Layers, "heads": &sh.Heads, "kv": &sh.KVHeads,
		"ffn": &sh.FFN, "vocab": &sh.Vocab, "ctx": &sh.Ctx}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		dst, known := fields[k]
		n, err := strconv.Atoi(v)
		if !ok || !known || err != nil || n <= 0 {
			return sh, fmt.Errorf("shape %q: want a preset (stories110M, tinyllama-1.1b, llama2-7b) or dim=…,layers=…,heads=…,ffn=…[,kv=…][,vocab=…][,ctx=…]", s)
		}
		*dst = n
	}
	if sh.KVHeads == 0 {
		sh.KVHeads = sh.Heads
	}
	if sh.Dim == 0 || sh.Layers == 0 || sh.Heads == 0 || sh.FFN == 0 || sh.Dim%sh.Heads != 0 || sh.Heads%sh.KVHeads != 0 {
		return sh, fmt.Errorf("shape %q: dim, layers, heads and ffn are required; dim must divide by heads and heads by kv", s)
	}
	return sh, nil
}

// Params counts the weights.
func (s Shape) Params() int {
	kv := s.Dim / s.Heads * s.KVHeads
	perLayer := 2*s.Dim*s.Dim + 2*s.Dim*kv + 3*s.Dim*s.FFN + 2*s.Dim
	return s.Layers*perLayer + 2*s.Vocab*s.Dim + s.Dim
}

// Options control what Write produces.
type Options struct {
	Type  quant.Type // of the matrices (norms stay F32)
	Seed  uint64
	Vocab *gguf.File // tokenizer metadata to copy; nil: a byte-level stand-in
	Name  string
}

// Build returns a writer holding a random model. Matrices whose row length
// is not a whole number of blocks of opts.Type fall back to Q8_0 and then
// F16 (IQ4_XS first to IQ4_NL), as llama.cpp's quantizer does.
func Build(sh Shape, opts Options) (*gguf.Writer, error) {
	if !quant.CanQuantize(opts.Type) {
		return nil, fmt.Errorf("synth: cannot write tensors of type %v", opts.Type)
	}
	if n, ok := sh.Bytes(opts.Type); !ok || n > MaxBytes {
		return nil, &TooLargeError{Shape: sh, Type: opts.Type, Bytes: n}
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	name := opts.Name
	if name == "" {
		name = "dovetail synthetic"
	}
	w.Set("general.name", name)
	w.Set("general.description", "random weights: real speed, meaningless text")
	w.Set("llama.context_length", uint32(sh.Ctx))
	w.Set("llama.embedding_length", uint32(sh.Dim))
	w.Set("llama.block_count", uint32(sh.Layers))
	w.Set("llama.feed_forward_length", uint32(sh.FFN))
	w.Set("llama.attention.head_count", uint32(sh.Heads))
	w.Set("llama.attention.head_count_kv", uint32(sh.KVHeads))
	w.Set("llama.rope.dimension_count", uint32(sh.Dim/sh.Heads))
	w.Set("llama.rope.freq_base", float32(10000))
	w.Set("llama.attention.layer_norm_rms_epsilon", float32(1e-5))
	w.Set("general.quantization_version", uint32(2))
	if err := copyVocab(w, sh, opts.Vocab); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5eed))
	kv := sh.Dim / sh.Heads * sh.KVHeads
	mat := func(name string, cols, rows int, std float64) error {
		return addMatrix(w, name, opts.Type, cols, rows, std, rng)
	}
	ones := func(name string, n int) {
		b := make([]byte, 4*n)
		quant.QuantizeRow(quant.F32, b, constant(n, 1))
		w.AddTensor(name, quant.F32, []uint64{uint64(n)}, b)
	}
	// Weights scaled as at initialisation keep activations of order one.
	std := 1 / math.Sqrt(float64(sh.Dim))
	if err := mat("token_embd.weight", sh.Dim, sh.Vocab, 1); err != nil {
		return nil, err
	}
	ones("output_norm.weight", sh.Dim)
	if err := mat("output.weight", sh.Dim, sh.Vocab, std); err != nil {
		return nil, err
	}
	for l := 0; l < sh.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ones(p+"attn_norm.weight", sh.Dim)
		ones(p+"ffn_norm.weight", sh.Dim)
		for _, m := range []struct {
			name       string
			cols, rows int
			std        float64
		}{
			{"attn_q.weight", sh.Dim, sh.Dim, std}, {"attn_k.weight", sh.Dim, kv, std},
			{"attn_v.weight", sh.Dim, kv, std}, {"attn_output.weight", sh.Dim, sh.Dim, std},
			{"ffn_gate.weight", sh.Dim, sh.FFN, std}, {"ffn_up.weight", sh.Dim, sh.FFN, std},
			{"ffn_down.weight", sh.FFN, sh.Dim, 1 / math.Sqrt(float64(sh.FFN))},
		} {
			if err := mat(p+m.name, m.cols, m.rows, m.std); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

func constant(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// matrixType is the type a matrix of rows cols wide is written in: t, or
// the first fallback whose blocks its rows hold whole.
func matrixType(t quant.Type, cols int) quant.Type {
	cands := []quant.Type{t, quant.Q8_0, quant.F16}
	if t == quant.IQ4_XS {
		cands = []quant.Type{t, quant.IQ4_NL, quant.Q8_0, quant.F16}
	}
	for _, cand := range cands {
		if cols%cand.BlockSize() == 0 {
			return cand
		}
	}
	return t
}

// addMatrix quantizes a rows × cols Gaussian matrix row by row. The
// values are drawn in order from rng, and chunks of rows are quantized on
// every core as they are drawn (a 7B's K-quants take minutes on one): the
// file is the same however many cores there are.
func addMatrix(w *gguf.Writer, name string, t quant.Type, cols, rows int, std float64, rng *rand.Rand) error {
	t = matrixType(t, cols)
	rowBytes, err := t.RowSize(cols)
	if err != nil {
		return fmt.Errorf("synth: %s: %w", name, err)
	}
	data := make([]byte, rows*rowBytes)
	const chunk = 64
	errs := make([]error, (rows+chunk-1)/chunk)
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < rows; lo += chunk {
		hi := min(lo+chunk, rows)
		vals := make([]float32, (hi-lo)*cols)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * std)
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			for r := lo; r < hi; r++ {
				row := vals[(r-lo)*cols : (r-lo+1)*cols]
				if err := quant.QuantizeRow(t, data[r*rowBytes:(r+1)*rowBytes], row); err != nil {
					errs[lo/chunk] = fmt.Errorf("synth: %s: %w", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Every chunk fails alike (a type that cannot be quantized): the
	// first says it.
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return w.AddTensor(name, t, []uint64{uint64(cols), uint64(rows)}, data)
}

// copyVocab copies the tokenizer of vocab, or makes a stand-in: byte tokens
// and filler so that any text tokenizes.
func copyVocab(w *gguf.Writer, sh Shape, vocab *gguf.File) error {
	if vocab != nil {
		toks, ok := vocab.Strings("tokenizer.ggml.tokens")
		if !ok {
			return fmt.Errorf("synth: %s has no tokenizer.ggml.tokens", vocab.Path)
		}
		if len(toks) != sh.Vocab {
			return fmt.Errorf("synth: %s has %d tokens but the shape asks for vocab=%d", vocab.Path, len(toks), sh.Vocab)
		}
		for _, kv := range vocab.KVs {
			if strings.HasPrefix(kv.Key, "tokenizer.") {
				w.Set(kv.Key, kv.Value)
			}
		}
		return nil
	}
	if sh.Vocab < 259 {
		return fmt.Errorf("synth: a vocabulary of %d tokens is too small for the byte-level stand-in (need 259); pass a vocab GGUF", sh.Vocab)
	}
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	for len(toks) < sh.Vocab {
		toks = append(toks, fmt.Sprintf("▁t%d", len(toks)))
		types = append(types, 1)
	}
	scores := make([]float32, len(toks))
	w.Set("tokenizer.ggml.model", "llama")
	w.Set("tokenizer.ggml.tokens", toks)
	w.Set("tokenizer.ggml.scores", scores)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.bos_token_id", uint32(1))
	w.Set("tokenizer.ggml.eos_token_id", uint32(2))
	w.Set("tokenizer.ggml.unknown_token_id", uint32(0))
	return nil
}
