package tokenizer

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"dovetail/models/gguf"
)

const goldenDir = "../../testdata/golden/tokenizer"

// vocabCase is one vocabulary with llama.cpp's expected outputs.
type vocabCase struct {
	name  string // for reports
	model string // GGUF holding the vocabulary
	vecs  string // path prefix of .inp / .out
}

var vocabCases = []vocabCase{
	{"llama-spm", goldenDir + "/ggml-vocab-llama-spm.gguf", goldenDir + "/ggml-vocab-llama-spm.gguf"},
	{"llama-bpe", goldenDir + "/ggml-vocab-llama-bpe.gguf", goldenDir + "/ggml-vocab-llama-bpe.gguf"},
	{"gpt-2", goldenDir + "/ggml-vocab-gpt-2.gguf", goldenDir + "/ggml-vocab-gpt-2.gguf"},
	{"phi-3", goldenDir + "/ggml-vocab-phi-3.gguf", goldenDir + "/ggml-vocab-phi-3.gguf"},
	{"falcon", goldenDir + "/ggml-vocab-falcon.gguf", goldenDir + "/ggml-vocab-falcon.gguf"},
	{"deepseek-llm", goldenDir + "/ggml-vocab-deepseek-llm.gguf", goldenDir + "/ggml-vocab-deepseek-llm.gguf"},
	{"starcoder", goldenDir + "/ggml-vocab-starcoder.gguf", goldenDir + "/ggml-vocab-starcoder.gguf"},
	{"stories260K", "../../testdata/models/stories260K/stories260K-f32.gguf", goldenDir + "/stories260K"},
	{"tinystories656K", "../../testdata/models/tinystories656K/tinystories656K-f32.gguf", goldenDir + "/tinystories656K"},
}

var (
	loadMu    sync.Mutex
	loadCache = map[string]*Tokenizer{}
)

func load(t testing.TB, path string) *Tokenizer {
	t.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if tok, ok := loadCache[path]; ok {
		return tok
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := New(f)
	if err != nil {
		t.Fatal(err)
	}
	loadCache[path] = tok
	return tok
}

type vector struct {
	text string
	ids  []int
}

// readVectors pairs texts and expected ids the way llama.cpp's
// test-tokenizer-0 does: texts are separated by "\n__ggml_vocab_test__\n"
// and a trailing separator does not start another text.
func readVectors(t testing.TB, prefix string) []vector {
	t.Helper()
	inp, err := os.ReadFile(prefix + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	outb, err := os.ReadFile(prefix + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	for s := string(inp); s != ""; {
		i := strings.Index(s, sep)
		if i < 0 {
			texts = append(texts, s)
			break
		}
		texts = append(texts, s[:i])
		s = s[i+len(sep):]
	}
	lines := strings.Split(strings.TrimSuffix(string(outb), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d texts but %d result lines", prefix, len(texts), len(lines))
	}
	vecs := make([]vector, len(texts))
	for i, text := range texts {
		vecs[i].text = text
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", prefix, i+1, err)
			}
			vecs[i].ids = append(vecs[i].ids, id)
		}
	}
	return vecs
}

// TestGolden checks every text of every vocabulary against llama.cpp's
// output, with add_special and parse_special off as in test-tokenizer-0.
// An empty expected line for a non-empty text is llama.cpp failing the call
// (tinystories656K has no byte fallback); TryEncode must fail there too.
func TestGolden(t *testing.T) {
	for _, vc := range vocabCases {
		t.Run(vc.name, func(t *testing.T) {
			tok := load(t, vc.model)
			vecs := readVectors(t, vc.vecs)
			pass := 0
			for i, v := range vecs {
				got, err := tok.TryEncode(v.text, false, false)
				if err != nil {
					if len(v.ids) == 0 && v.text != "" {
						pass++
						continue
					}
					t.Errorf("text %d %q: %v", i, v.text, err)
					continue
				}
				if !equalInts(got, v.ids) {
					t.Errorf("text %d %q:\n got  %v\n want %v", i, v.text, got, v.ids)
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d texts match llama.cpp", vc.name, pass, len(vecs))
		})
	}
}

// TestRoundTrip decodes the golden texts' encodings back: byte-level BPE is
// lossless, and SentencePiece is too once the prefix space is undone, for
// every text whose characters the vocabulary can spell.
func TestRoundTrip(t *testing.T) {
	for _, vc := range vocabCases {
		t.Run(vc.name, func(t *testing.T) {
			tok := load(t, vc.model)
			for i, v := range readVectors(t, vc.vecs) {
				ids, err := tok.TryEncode(v.text, false, false)
				if err != nil {
					continue // no byte fallback: not representable
				}
				want := v.text
				if tok.kind == kindBPE {
					// llama.cpp's pre-tokenizer replaces invalid UTF-8.
					want = strings.ToValidUTF8(want, "\uFFFD")
				}
				if got := tok.Decode(ids); got != want {
					t.Errorf("text %d: Decode(Encode(%q)) = %q", i, v.text, got)
				}
				ids2, _ := tok.TryEncode(v.text, true, false)
				if got := tok.Decode(ids2); tok.AddBOS() && got != tok.Piece(tok.BOS())+want {
					t.Errorf("text %d with BOS: Decode = %q", i, got)
				}
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
