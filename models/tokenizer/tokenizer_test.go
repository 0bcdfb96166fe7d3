package tokenizer

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"dovetail/models/gguf"
)

const (
	llamaSPM = goldenDir + "/ggml-vocab-llama-spm.gguf"
	llamaBPE = goldenDir + "/ggml-vocab-llama-bpe.gguf"
	gpt2     = goldenDir + "/ggml-vocab-gpt-2.gguf"
	phi3     = goldenDir + "/ggml-vocab-phi-3.gguf"
	deepseek = goldenDir + "/ggml-vocab-deepseek-llm.gguf"
)

// synthetic builds a GGUF in memory from metadata.
func synthetic(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	for k, v := range kv {
		w.Set(k, v)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("synthetic.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestUnknownPreTokenizer(t *testing.T) {
	f := synthetic(t, map[string]any{
		"tokenizer.ggml.model":  "gpt2",
		"tokenizer.ggml.pre":    "no-such-pre",
		"tokenizer.ggml.tokens": []string{"a", "b", "ab"},
		"tokenizer.ggml.merges": []string{"a b"},
	})
	_, err := New(f)
	if err == nil || !strings.Contains(err.Error(), `"no-such-pre"`) || !strings.Contains(err.Error(), "llama-bpe") {
		t.Fatalf("want an error naming the pre-tokenizer and listing supported ones, got %v", err)
	}
}

func TestUnknownModel(t *testing.T) {
	f := synthetic(t, map[string]any{
		"tokenizer.ggml.model":  "t5",
		"tokenizer.ggml.tokens": []string{"a"},
	})
	_, err := New(f)
	if err == nil || !strings.Contains(err.Error(), `"t5"`) || !strings.Contains(err.Error(), "gpt2") {
		t.Fatalf("want an error naming the model type and listing supported ones, got %v", err)
	}
}

func TestMissingPreIsDefault(t *testing.T) {
	f := synthetic(t, map[string]any{
		"tokenizer.ggml.model":  "gpt2",
		"tokenizer.ggml.tokens": []string{"a", "b", "ab", "Ġ", "Ġab"},
		"tokenizer.ggml.merges": []string{"a b", "Ġ ab"},
	})
	tok, err := New(f)
	if err != nil {
		t.Fatal(err)
	}
	if tok.PreTokenizer() != "default" {
		t.Fatalf("pre-tokenizer %q, want default", tok.PreTokenizer())
	}
	if got := tok.Encode("ab ab", false, false); !slices.Equal(got, []int{2, 4}) {
		t.Fatalf("Encode = %v, want [2 4]", got)
	}
	// gpt2-type vocabularies default to BOS/EOS id 11, which this one lacks.
	if tok.BOS() != -1 || tok.AddBOS() {
		t.Fatalf("BOS %d AddBOS %v, want -1 false", tok.BOS(), tok.AddBOS())
	}
}

func TestAddBOSWithoutBOS(t *testing.T) {
	f := synthetic(t, map[string]any{
		"tokenizer.ggml.model":         "gpt2",
		"tokenizer.ggml.pre":           "gpt-2",
		"tokenizer.ggml.tokens":        []string{"a"},
		"tokenizer.ggml.merges":        []string{},
		"tokenizer.ggml.add_bos_token": true,
	})
	if _, err := New(f); err == nil || !strings.Contains(err.Error(), "bos_token_id") {
		t.Fatalf("want an error about the missing BOS id, got %v", err)
	}
}

func TestSpecialDefaults(t *testing.T) {
	for _, c := range []struct {
		path     string
		bos, eos int
		addBOS   bool
	}{
		{llamaSPM, 1, 2, true},
		{llamaBPE, 128000, 128001, true}, // no add_bos_token key: llama-bpe defaults it on
		{gpt2, 50256, 50256, false},
		{phi3, 1, 32000, true},
		{"../../testdata/models/stories260K/stories260K-f32.gguf", 1, 2, true}, // SPM defaults
	} {
		tok := load(t, c.path)
		if tok.BOS() != c.bos || tok.EOS() != c.eos || tok.AddBOS() != c.addBOS {
			t.Errorf("%s: BOS %d EOS %d AddBOS %v, want %d %d %v", c.path, tok.BOS(), tok.EOS(), tok.AddBOS(), c.bos, c.eos, c.addBOS)
		}
		ids := tok.Encode("Hello", true, false)
		if (ids[0] == c.bos) != c.addBOS {
			t.Errorf("%s: Encode with addSpecial = %v", c.path, ids)
		}
	}
}

func TestEOG(t *testing.T) {
	for _, c := range []struct {
		path   string
		eog    []string
		notEOG []string
	}{
		{llamaBPE, []string{"<|end_of_text|>", "<|eot_id|>"}, []string{"<|begin_of_text|>", "<|start_header_id|>", "Hello"}},
		{phi3, []string{"<|endoftext|>", "<|end|>"}, []string{"<s>", "<|user|>", "<|assistant|>"}},
		{gpt2, []string{"<|endoftext|>"}, []string{"Hello"}},
		{llamaSPM, []string{"</s>"}, []string{"<s>", "<unk>"}},
	} {
		tok := load(t, c.path)
		for _, s := range c.eog {
			if id, ok := tok.Lookup(s); !ok || !tok.IsEOG(id) {
				t.Errorf("%s: %q (%d, %v) should end generation", c.path, s, id, ok)
			}
		}
		for _, s := range c.notEOG {
			if id, ok := tok.Lookup(s); ok && tok.IsEOG(id) {
				t.Errorf("%s: %q should not end generation", c.path, s)
			}
		}
	}
}

func TestParseSpecialLlama3(t *testing.T) {
	tok := load(t, llamaBPE)
	id := func(s string) int {
		i, ok := tok.Lookup(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	text := "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
	got := tok.Encode(text, false, true)
	want := []int{id("<|begin_of_text|>"), id("<|start_header_id|>")}
	want = append(want, tok.Encode("user", false, false)...)
	want = append(want, id("<|end_header_id|>"))
	want = append(want, tok.Encode("\n\nHello", false, false)...)
	want = append(want, id("<|eot_id|>"))
	if !slices.Equal(got, want) {
		t.Fatalf("parseSpecial:\n got  %v\n want %v", got, want)
	}
	if tok.Decode(got) != text {
		t.Fatalf("Decode = %q", tok.Decode(got))
	}
	plain := tok.Encode(text, false, false)
	for _, i := range plain {
		if tok.IsControl(i) {
			t.Fatalf("without parseSpecial, control token %d (%q) came out of raw text", i, tok.TokenText(i))
		}
	}
	if tok.Decode(plain) != text {
		t.Fatalf("Decode(plain) = %q", tok.Decode(plain))
	}
	// add_special with BOS text already present gives two BOS, as llama.cpp.
	if got := tok.Encode("<|begin_of_text|>Hi", true, true); got[0] != tok.BOS() || got[1] != tok.BOS() {
		t.Fatalf("double BOS expected, got %v", got)
	}
}

func TestParseSpecialPhi3(t *testing.T) {
	tok := load(t, phi3)
	user, _ := tok.Lookup("<|user|>")
	end, _ := tok.Lookup("<|end|>")
	// phi-3's special tokens swallow the whitespace after them (rstrip), and
	// the text after a special token gets SentencePiece's prefix space.
	got := tok.Encode("<|user|>\nHi there<|end|>\n", false, true)
	want := append([]int{user}, tok.Encode("Hi there", false, false)...)
	want = append(want, end)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// </s> is user-defined in this vocabulary: split out even without
	// parseSpecial, while the control token <|user|> is not.
	eos, _ := tok.Lookup("</s>")
	plain := tok.Encode("a</s>b <|user|>", false, false)
	if !slices.Contains(plain, eos) || slices.Contains(plain, user) {
		t.Fatalf("parseSpecial=false: %v", plain)
	}
}

func TestUserDefinedAlwaysSplit(t *testing.T) {
	tok := load(t, deepseek)
	id, ok := tok.Lookup("ø")
	if !ok || tok.attrs[id]&attrUserDefined == 0 {
		t.Fatalf("ø is not a user-defined token of %s", deepseek)
	}
	if got := tok.Encode("søn", false, false); !slices.Contains(got, id) {
		t.Fatalf("user-defined token not split out: %v", got)
	}
}

// TestPartitionOrder pins llama.cpp's order of splitting out special tokens:
// longest token first over the whole text, not a leftmost scan.
func TestPartitionOrder(t *testing.T) {
	f := synthetic(t, map[string]any{
		"tokenizer.ggml.model":      "gpt2",
		"tokenizer.ggml.pre":        "gpt-2",
		"tokenizer.ggml.tokens":     []string{"a", "b", "c", "d", "ab", "bcd"},
		"tokenizer.ggml.token_type": []int{1, 1, 1, 1, 4, 4},
		"tokenizer.ggml.merges":     []string{},
	})
	tok, err := New(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("abcd", false, false); !slices.Equal(got, []int{0, 5}) {
		t.Fatalf("Encode(abcd) = %v, want [0 5] (a, <bcd>)", got)
	}
}

func TestSPMLeadingSpace(t *testing.T) {
	tok := load(t, llamaSPM)
	hello := tok.Encode("Hello", false, false)
	if len(hello) != 1 || tok.Piece(hello[0]) != " Hello" {
		t.Fatalf("Encode(Hello) = %v (%q)", hello, tok.Piece(hello[0]))
	}
	if tok.Decode(hello) != "Hello" {
		t.Fatalf("Decode = %q", tok.Decode(hello))
	}
	withBOS := tok.Encode("Hello", true, false)
	if got := tok.Decode(withBOS); got != "<s>Hello" {
		t.Fatalf("Decode with BOS = %q", got)
	}
	// The stream is raw: a generated token keeps its space.
	d := tok.NewDecoder()
	if s := d.Add(hello[0]) + d.Flush(); s != " Hello" {
		t.Fatalf("stream = %q", s)
	}
}

func TestNoByteFallback(t *testing.T) {
	tok := load(t, "../../testdata/models/tinystories656K/tinystories656K-f32.gguf")
	if _, err := tok.TryEncode("a½b", false, false); err == nil {
		t.Fatal("TryEncode should fail like llama.cpp on a byte with no token")
	}
	ids := tok.Encode("a½b", false, false)
	if !slices.Contains(ids, tok.unkID()) {
		t.Fatalf("Encode should put the unknown token for ½: %v", ids)
	}
}

func (t *Tokenizer) unkID() int { return int(t.unk) }

func TestStreamDecoderSplitsChars(t *testing.T) {
	tok := load(t, llamaSPM)
	c3, _ := tok.Lookup("<0xC3>")
	a9, _ := tok.Lookup("<0xA9>")
	d := tok.NewDecoder()
	if s := d.Add(c3); s != "" {
		t.Fatalf("half a character emitted: %q", s)
	}
	if s := d.Add(a9); s != "é" {
		t.Fatalf("got %q, want é", s)
	}
	if s := d.Flush(); s != "" {
		t.Fatalf("flush after a complete char: %q", s)
	}
	// An unfinished sequence comes out as U+FFFD on Flush, never raw.
	d.Add(c3)
	if s := d.Flush(); s != "\uFFFD" {
		t.Fatalf("flush of a dangling lead byte: %q", s)
	}
	// A byte that cannot continue the held one is not held forever.
	d.Add(c3)
	h, _ := tok.Lookup("H")
	if s := d.Add(h); s != "\uFFFDH" {
		t.Fatalf("got %q", s)
	}
}

// TestStreamDecoderGolden streams every golden encoding token by token:
// every chunk is valid UTF-8 and together they are the joined pieces.
func TestStreamDecoderGolden(t *testing.T) {
	for _, vc := range vocabCases {
		tok := load(t, vc.model)
		for _, v := range readVectors(t, vc.vecs) {
			ids := tok.Encode(v.text, false, false)
			var raw, streamed strings.Builder
			d := tok.NewDecoder()
			for _, id := range ids {
				raw.WriteString(tok.Piece(id))
				s := d.Add(id)
				if !utf8.ValidString(s) {
					t.Fatalf("%s: invalid UTF-8 chunk %q", vc.name, s)
				}
				streamed.WriteString(s)
			}
			streamed.WriteString(d.Flush())
			if want := strings.ToValidUTF8(raw.String(), "\uFFFD"); streamed.String() != want {
				t.Fatalf("%s: streamed %q, want %q", vc.name, streamed.String(), want)
			}
		}
	}
}

func TestEmojiAcrossTokens(t *testing.T) {
	for _, path := range []string{gpt2, llamaSPM} {
		tok := load(t, path)
		ids := tok.Encode("🦙🦙", false, false)
		if len(ids) < 3 {
			t.Fatalf("%s: expected the emoji split over several tokens: %v", path, ids)
		}
		d := tok.NewDecoder()
		var out strings.Builder
		for _, id := range ids {
			s := d.Add(id)
			if !utf8.ValidString(s) {
				t.Fatalf("%s: invalid chunk %q", path, s)
			}
			out.WriteString(s)
		}
		out.WriteString(d.Flush())
		if strings.TrimPrefix(out.String(), " ") != "🦙🦙" {
			t.Fatalf("%s: streamed %q", path, out.String())
		}
	}
}

func TestPieceAndLookup(t *testing.T) {
	tok := load(t, gpt2)
	id, ok := tok.Lookup("Ġworld")
	if !ok || tok.Piece(id) != " world" || tok.TokenText(id) != "Ġworld" {
		t.Fatalf("Lookup/Piece/TokenText: %d %v %q %q", id, ok, tok.Piece(id), tok.TokenText(id))
	}
	if tok.VocabSize() != 50257 {
		t.Fatalf("VocabSize = %d", tok.VocabSize())
	}
	if tok.Piece(-1) != "" || tok.Piece(1<<30) != "" {
		t.Fatal("out-of-range ids must render as nothing")
	}
}

func TestInvalidUTF8(t *testing.T) {
	// The BPE pre-tokenizer sees U+FFFD for each undecodable byte, as in
	// llama.cpp; SentencePiece spells the raw bytes with byte tokens.
	bpe := load(t, gpt2)
	if got, want := bpe.Encode("a\xffb", false, false), bpe.Encode("a\uFFFDb", false, false); !slices.Equal(got, want) {
		t.Fatalf("gpt2: %v vs %v", got, want)
	}
	spm := load(t, llamaSPM)
	ff, _ := spm.Lookup("<0xFF>")
	if got := spm.Encode("a\xffb", false, false); !slices.Contains(got, ff) {
		t.Fatalf("spm: %v lacks <0xFF>", got)
	}
	if got := spm.Decode(spm.Encode("a\xffb", false, false)); got != "a\xffb" {
		t.Fatalf("spm round trip %q", got)
	}
}

func BenchmarkLoad(b *testing.B) {
	f, err := gguf.Open(llamaBPE)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		if _, err := New(f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeScaling shows that encoding cost grows linearly: each case
// runs at 200 and 1600 units, and a quadratic step would make the second
// about 64 times the first instead of 8 (compare ns/op of n=200 and n=1600).
func BenchmarkEncodeScaling(b *testing.B) {
	unit := "Once upon a time, there was a little girl named Lily. 她喜欢在公园里玩。 🦙🦙 3.14159\n  "
	for _, c := range []struct {
		name, path string
		text       func(n int) string
	}{
		{"llama-bpe", llamaBPE, func(n int) string { return strings.Repeat(unit, n) }},
		{"llama-spm", llamaSPM, func(n int) string { return strings.Repeat(unit, n) }},
		{"deepseek", deepseek, func(n int) string { return strings.Repeat(unit, n) }},
		{"gpt2-long-word", gpt2, func(n int) string { return strings.Repeat("a", 40*n) }},
		{"spm-symbol-chain", llamaSPM, func(n int) string { return strings.Repeat("ab", 20*n) }},
		{"bpe-whitespace-run", llamaBPE, func(n int) string { return strings.Repeat(" ", 40*n) + "x" }},
		{"deepseek-space-digit", deepseek, func(n int) string { return strings.Repeat(" ", 40*n) + "1" }},
		{"falcon-punct", goldenDir + "/ggml-vocab-falcon.gguf", func(n int) string { return strings.Repeat("!?", 20*n) }},
		{"stories260K", "../../testdata/models/stories260K/stories260K-f32.gguf", func(n int) string { return strings.Repeat(unit, n) }},
	} {
		tok := load(b, c.path)
		for _, n := range []int{200, 1600} {
			text := c.text(n)
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					tok.Encode(text, false, false)
				}
			})
		}
	}
}

func BenchmarkEncodeLlamaBPE(b *testing.B) {
	tok := load(b, llamaBPE)
	text := strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside.\n", 100)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, false, false)
	}
}

func BenchmarkEncodeLlamaSPM(b *testing.B) {
	tok := load(b, llamaSPM)
	text := strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside.\n", 100)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, false, false)
	}
}

func TestCodepointBeyondUnicode(t *testing.T) {
	// F4 90 80 80 decodes (leniently, as llama.cpp does) to U+110000, which
	// llama.cpp then cannot re-encode: the call fails.
	tok := load(t, llamaBPE)
	if _, err := tok.TryEncode("a\xf4\x90\x80\x80", false, false); err == nil {
		t.Fatal("TryEncode should fail on a codepoint past U+10FFFF")
	}
	if got, want := tok.Encode("a\xf4\x90\x80\x80", false, false), tok.Encode("a\uFFFD", false, false); !slices.Equal(got, want) {
		t.Fatalf("Encode = %v, want %v", got, want)
	}
}

// TestConcurrentEncode shares one Tokenizer between goroutines; run with
// -race to check New leaves nothing mutable behind.
func TestConcurrentEncode(t *testing.T) {
	tok := load(t, llamaBPE)
	text := "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～"
	want := tok.Encode(text, true, true)
	done := make(chan []int)
	for range 4 {
		go func() { done <- tok.Encode(text, true, true) }()
	}
	for range 4 {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatalf("concurrent Encode = %v, want %v", got, want)
		}
	}
}

func TestQueueKeys(t *testing.T) {
	scores := []float32{3.5, 1, 0, -0.0, -1e-30, -2, -1e9}
	for i := 1; i < len(scores); i++ {
		a, b := spmKey(scores[i-1], 7), spmKey(scores[i], 7)
		if scores[i-1] == scores[i] && a != b || scores[i-1] > scores[i] && a >= b {
			t.Errorf("score %v should pop before %v", scores[i-1], scores[i])
		}
	}
	if spmKey(-2, 3) >= spmKey(-2, 4) || bpeKey(5, 3) >= bpeKey(5, 4) || bpeKey(4, 9) >= bpeKey(5, 0) {
		t.Error("ties must go to the leftmost bigram, and lower ranks first")
	}
	var q bigramQueue
	for _, k := range []uint64{5, 1, 9, 3, 7, 2, 8} {
		q.push(bigram{key: k})
	}
	var got []uint64
	for len(q) > 0 {
		got = append(got, q.pop().key)
	}
	if !slices.IsSorted(got) {
		t.Errorf("pop order %v", got)
	}
}

// EOGTexts names every end-of-generation token's text, the TinyStories
// model's "<|end_story|>" (its EOS) included, and no other token's.
func TestEOGTexts(t *testing.T) {
	tok := load(t, "../../testdata/models/tinystories656K/tinystories656K-f32.gguf")
	got := tok.EOGTexts()
	if !slices.Contains(got, "<|end_story|>") || slices.Contains(got, "<|start_story|>") {
		t.Errorf("TinyStories' end texts %q", got)
	}
	llama := load(t, llamaBPE)
	got = llama.EOGTexts()
	if !slices.Contains(got, "<|eot_id|>") || !slices.Contains(got, "<|end_of_text|>") || slices.Contains(got, "<|begin_of_text|>") {
		t.Errorf("Llama 3's end texts %q", got)
	}
	for i := 1; i < len(got); i++ {
		if len(got[i]) > len(got[i-1]) {
			t.Errorf("not longest first: %q", got)
		}
	}
}
