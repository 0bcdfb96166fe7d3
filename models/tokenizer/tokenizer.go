// Package tokenizer turns text into token ids and back using the vocabulary
// stored in a GGUF file, reproducing llama.cpp's llama_tokenize token for
// token: the same SentencePiece-style merge order, the same byte-level BPE
// pre-tokenizer regexes (quirks included), the same special-token splitting
// and the same BOS/EOS defaults. Anything less would feed a model ids it was
// not trained to see and make outputs diverge from llama.cpp's.
package tokenizer

import (
	"errors"
	"fmt"
	"strings"

	"dovetail/models/gguf"
)

type vocabKind uint8

const (
	kindSPM vocabKind = iota // tokenizer.ggml.model "llama"
	kindBPE                  // tokenizer.ggml.model "gpt2"
)

// Token attributes, derived from tokenizer.ggml.token_type and adjusted the
// way llama.cpp adjusts them after loading.
type tokenAttr uint16

const (
	attrUnknown tokenAttr = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrLStrip // whitespace before the token is dropped when splitting it out
	attrRStrip // whitespace after it is dropped
)

// GGUF token types (tokenizer.ggml.token_type).
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

const null = -1 // an absent special token id

// Tokenizer is immutable after New and safe for concurrent use.
type Tokenizer struct {
	kind   vocabKind
	pre    string
	tokens []string
	scores []float32
	attrs  []tokenAttr
	ids    map[string]int32

	// BPE
	merges       map[mergePair]int32
	splitter     *splitter
	ignoreMerges bool

	// SPM
	addSpacePrefix bool
	byteTokens     [256]int32 // <0xXX> or the byte itself, or null

	addBOS, addEOS bool
	bos, eos, unk  int32
	eog            map[int32]bool

	// special lists the ids tokenizer_st_partition looks for in raw text,
	// longest text first.
	special []int32
}

const keyPrefix = "tokenizer.ggml."

// New builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata. It
// copies what it needs, so f may be closed afterwards. Settings the file
// leaves out take llama.cpp's defaults for the model type, since that is
// what the file's producer tested against: SentencePiece adds BOS and a
// prefix space; byte-level BPE adds BOS only for pre-tokenizers that ask
// for it (llama-bpe, tekken, chameleon), and a missing pre-tokenizer name
// means "default".
func New(f *gguf.File) (*Tokenizer, error) {
	model, ok := f.String(keyPrefix + "model")
	if !ok {
		return nil, errors.New("tokenizer: no tokenizer.ggml.model in the file")
	}
	t := &Tokenizer{}
	switch model {
	case "llama":
		t.kind = kindSPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addSpacePrefix, t.addBOS = true, true
	case "gpt2":
		t.kind = kindBPE
		t.bos, t.eos, t.unk = 11, 11, null
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q (tokenizer.ggml.model); supported: llama (SentencePiece BPE), gpt2 (byte-level BPE)", model)
	}

	if err := t.loadVocab(f); err != nil {
		return nil, err
	}

	if t.kind == kindBPE {
		t.pre, ok = f.String(keyPrefix + "pre")
		if !ok || t.pre == "" {
			// llama.cpp warns and carries on with the default regexes.
			t.pre = "default"
		}
		p, known := preTokenizers[t.pre]
		if !known {
			return nil, unknownPreError(t.pre)
		}
		sp, err := newSplitter(p.exprs)
		if err != nil {
			return nil, err
		}
		t.splitter, t.ignoreMerges, t.addBOS = sp, p.ignoreMerges, p.addBOS
		if err := t.loadMerges(f); err != nil {
			return nil, err
		}
	} else {
		t.pre = "default"
		t.findByteTokens()
	}
	if v, ok := f.Bool(keyPrefix + "add_space_prefix"); ok {
		t.addSpacePrefix = v
	}
	return t, t.loadSpecial(f)
}

func (t *Tokenizer) loadVocab(f *gguf.File) error {
	tokens, ok := f.Strings(keyPrefix + "tokens")
	if !ok {
		return errors.New("tokenizer: no string array tokenizer.ggml.tokens in the file")
	}
	n := len(tokens)
	t.tokens = tokens
	t.scores = make([]float32, n)
	if _, present := f.Get(keyPrefix + "scores"); present {
		if s, ok := f.Float32s(keyPrefix + "scores"); ok && len(s) >= n {
			copy(t.scores, s)
		} else if s, ok := f.Ints(keyPrefix + "scores"); ok && len(s) >= n {
			for i := range t.scores {
				t.scores[i] = float32(s[i])
			}
		} else {
			return fmt.Errorf("tokenizer: tokenizer.ggml.scores is not a number array of at least %d entries", n)
		}
	}
	t.attrs = make([]tokenAttr, n)
	var types []int
	if _, present := f.Get(keyPrefix + "token_type"); present {
		if types, ok = f.Ints(keyPrefix + "token_type"); !ok || len(types) < n {
			return fmt.Errorf("tokenizer: tokenizer.ggml.token_type is not an integer array of at least %d entries", n)
		}
	}
	t.ids = make(map[string]int32, n)
	for i, s := range tokens {
		// A repeated string maps to its last id, as llama.cpp's map
		// assignment did when these vectors were produced.
		t.ids[s] = int32(i)
		if types == nil {
			t.attrs[i] = attrNormal
			continue
		}
		switch types[i] {
		case typeNormal:
			t.attrs[i] = attrNormal
		case typeUnknown:
			t.attrs[i] = attrUnknown
		case typeControl:
			t.attrs[i] = attrControl
		case typeUserDefined:
			t.attrs[i] = attrUserDefined
		case typeUnused:
			t.attrs[i] = attrUnused
		case typeByte:
			t.attrs[i] = attrByte
		}
	}
	return nil
}

// findByteTokens resolves SentencePiece's byte fallback: a byte is the
// <0xXX> token, or failing that a token made of the byte itself.
func (t *Tokenizer) findByteTokens() {
	for b := 0; b < 256; b++ {
		t.byteTokens[b] = null
		if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteTokens[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.byteTokens[b] = id
		}
	}
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS is the beginning-of-sequence id, or -1 if the vocabulary has none.
func (t *Tokenizer) BOS() int { return int(t.bos) }

// EOS is the end-of-sequence id, or -1 if the vocabulary has none.
func (t *Tokenizer) EOS() int { return int(t.eos) }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether generation should stop at id: EOS, EOT and the other
// end-of-turn tokens llama.cpp recognises by their text.
func (t *Tokenizer) IsEOG(id int) bool { return t.eog[int32(id)] }

// IsControl reports a control token (BOS, EOS, chat markers, ...).
func (t *Tokenizer) IsControl(id int) bool {
	return t.valid(id) && t.attrs[id]&attrControl != 0
}

// TokenText is the vocabulary string of id, as stored (▁ or byte-level
// escapes included).
func (t *Tokenizer) TokenText(id int) string {
	if !t.valid(id) {
		return ""
	}
	return t.tokens[id]
}

// Lookup finds the id whose vocabulary string is exactly text.
func (t *Tokenizer) Lookup(text string) (int, bool) {
	id, ok := t.ids[text]
	return int(id), ok
}

// PreTokenizer names the pre-tokenizer in use ("default" for SentencePiece).
func (t *Tokenizer) PreTokenizer() string { return t.pre }

func (t *Tokenizer) valid(id int) bool { return id >= 0 && id < len(t.tokens) }

// Encode tokenizes text. addSpecial adds BOS/EOS as the metadata asks;
// parseSpecial turns the texts of control tokens (like "<|im_start|>") found
// in text into those tokens (user-defined tokens are always split out, as in
// llama.cpp). Where llama.cpp would fail (a byte with no token in a
// SentencePiece vocabulary without byte fallback) the unknown token stands in
// for the character; TryEncode reports such failures instead.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int {
	ids, _ := t.encode(text, addSpecial, parseSpecial, true)
	return ids
}

// TryEncode is Encode that fails where llama.cpp's llama_tokenize fails.
func (t *Tokenizer) TryEncode(text string, addSpecial, parseSpecial bool) ([]int, error) {
	return t.encode(text, addSpecial, parseSpecial, false)
}

func (t *Tokenizer) encode(text string, addSpecial, parseSpecial, lenient bool) ([]int, error) {
	frags := t.partition(text, parseSpecial)
	out := make([]int, 0, len(text)/3+2)
	if addSpecial && t.addBOS {
		out = append(out, int(t.bos))
	}
	// SentencePiece's prefix space goes before every run of text that starts
	// the input or follows a special token, as in llama.cpp.
	prevSpecial := true
	var err error
	for _, fr := range frags {
		if fr.token != null {
			out = append(out, int(fr.token))
			prevSpecial = true
			continue
		}
		s := text[fr.start:fr.end]
		switch t.kind {
		case kindSPM:
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out, err = t.spmEncode(strings.ReplaceAll(s, " ", spaceMark), out, lenient)
		case kindBPE:
			out, err = t.bpeEncode(s, out, lenient)
		}
		if err != nil {
			return nil, err
		}
		prevSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, int(t.eos))
	}
	return out, nil
}

// spaceMark is SentencePiece's visible space, U+2581.
const spaceMark = "\u2581"
