package tokenizer

import (
	"fmt"
	"sort"
	"strings"

	"dovetail/models/gguf"
)

// End-of-generation and helper tokens llama.cpp recognises by their text,
// because converters have not always recorded them in metadata. A token so
// recognised is also made a control token if it was not one.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
	eogTexts    = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
		"<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
		"<end_of_utterance>"}
)

// specialIDs are the special tokens GGUF names beside BOS, EOS and UNK
// (which the Tokenizer keeps itself): null where a file names none.
type specialIDs struct {
	eot, eom       int32
	fim            [6]int32 // pre suf mid pad rep sep
	sep, pad, mask int32
}

// loadSpecial reads the special tokens, which end generation, and how
// each special token's text is matched, as llama.cpp's vocabulary loader
// does.
func (t *Tokenizer) loadSpecial(f *gguf.File) error {
	ids := t.readSpecialIDs(f)
	if err := t.readAddFlags(f); err != nil {
		return err
	}
	t.detectSpecial(&ids)
	t.collectEOG(ids)
	t.sortSpecial()
	t.stripAttrs(f)
	return nil
}

// readSpecialIDs reads the ids GGUF names (tokenizer.ggml.*_token_id).
func (t *Tokenizer) readSpecialIDs(f *gguf.File) specialIDs {
	n := int32(len(t.tokens))
	ids := specialIDs{eot: null, eom: null, fim: [6]int32{null, null, null, null, null, null}, sep: null, pad: null, mask: null}
	// The last three are deprecated spellings of the first FIM keys; they are
	// read after the current ones, as llama.cpp does.
	for _, k := range []struct {
		key string
		id  *int32
	}{
		{"bos_token_id", &t.bos}, {"eos_token_id", &t.eos}, {"eot_token_id", &ids.eot},
		{"eom_token_id", &ids.eom}, {"unknown_token_id", &t.unk}, {"seperator_token_id", &ids.sep},
		{"padding_token_id", &ids.pad}, {"mask_token_id", &ids.mask}, {"fim_pre_token_id", &ids.fim[0]},
		{"fim_suf_token_id", &ids.fim[1]}, {"fim_mid_token_id", &ids.fim[2]}, {"fim_pad_token_id", &ids.fim[3]},
		{"fim_rep_token_id", &ids.fim[4]}, {"fim_sep_token_id", &ids.fim[5]}, {"prefix_token_id", &ids.fim[0]},
		{"suffix_token_id", &ids.fim[1]}, {"middle_token_id", &ids.fim[2]},
	} {
		if *k.id >= n {
			*k.id = null // a default the vocabulary is too small for
		}
		// An id outside the vocabulary (converters write 0xFFFFFFFF for
		// "none") keeps the default.
		if v, ok := f.Uint(keyPrefix + k.key); ok && v < uint64(n) {
			*k.id = int32(v)
		}
	}
	return ids
}

// readAddFlags reads whether encoding adds BOS and EOS, refusing a file
// that asks for one it does not name.
func (t *Tokenizer) readAddFlags(f *gguf.File) error {
	if v, ok := f.Bool(keyPrefix + "add_bos_token"); ok {
		t.addBOS = v
	}
	if v, ok := f.Bool(keyPrefix + "add_eos_token"); ok {
		t.addEOS = v
	}
	if t.addBOS && t.bos == null {
		return fmt.Errorf("tokenizer: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set")
	}
	if t.addEOS && t.eos == null {
		return fmt.Errorf("tokenizer: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set")
	}
	return nil
}

// detectSpecial finds the end-of-turn, end-of-message and FIM tokens a
// file does not name by their usual texts, and marks them control tokens.
func (t *Tokenizer) detectSpecial(ids *specialIDs) {
	// llama.cpp walks a hash map here and takes whichever match it meets
	// first; the lowest id is the deterministic stand-in.
	detect := func(p *int32, texts []string) {
		if *p != null {
			return
		}
		for _, s := range texts {
			if id, ok := t.ids[s]; ok && (*p == null || id < *p) {
				*p = id
			}
		}
		if *p != null {
			t.attrs[*p] |= attrControl
		}
	}
	detect(&ids.eot, eotTexts)
	detect(&ids.eom, eomTexts)
	for i, texts := range [][]string{fimPreTexts, fimSufTexts, fimMidTexts, fimPadTexts, fimRepTexts, fimSepTexts} {
		detect(&ids.fim[i], texts)
	}
}

// collectEOG gathers the tokens that end generation.
func (t *Tokenizer) collectEOG(ids specialIDs) {
	t.eog = map[int32]bool{}
	for _, id := range ids.fim[3:] { // pad, rep, sep
		if id != null {
			t.eog[id] = true
		}
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = true
			t.attrs[id] |= attrControl
		}
	}
	for _, id := range []int32{t.eos, ids.eot, ids.eom} {
		if id != null {
			t.eog[id] = true
		}
	}
	// gpt-oss (o200k_harmony) ends turns with <|return|> or <|call|>; its
	// <|end|> only ends a message and must not stop generation.
	if id, ok := t.ids["<|end|>"]; ok && t.eog[id] && t.hasEOG("<|return|>") && t.hasEOG("<|call|>") {
		delete(t.eog, id)
		t.attrs[id] = attrUserDefined
	}
}

// sortSpecial lists the special tokens, longest text first: the order
// their texts are matched in.
func (t *Tokenizer) sortSpecial() {
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	// llama.cpp's std::sort leaves equal lengths in no defined order; ids
	// ascending is the stable choice.
	sort.SliceStable(t.special, func(a, b int) bool {
		return len(t.tokens[t.special[a]]) > len(t.tokens[t.special[b]])
	})
}

// stripAttrs sets the per-model strip attributes llama.cpp hard-codes,
// as HF's added_tokens carry them but GGUF does not.
func (t *Tokenizer) stripAttrs(f *gguf.File) {
	name, _ := f.String("general.name")
	name = strings.ToLower(name)
	switch {
	case containsAny(t.pre, "jina-v2-de", "jina-v2-es", "jina-v2-code"):
		t.setAttr("<mask>", attrLStrip, true)
	case containsAny(name, "phi-3", "phi3"):
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		t.setAttr("</s>", attrRStrip, true)
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			t.setAttr(s, attrRStrip, false)
		}
	}
}

func (t *Tokenizer) hasEOG(text string) bool {
	id, ok := t.ids[text]
	return ok && t.eog[id]
}

func (t *Tokenizer) setAttr(text string, a tokenAttr, on bool) {
	id, ok := t.ids[text]
	if !ok {
		return
	}
	if on {
		t.attrs[id] |= a
	} else {
		t.attrs[id] &^= a
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// fragment is a run of raw text (token == null) or one special token.
type fragment struct {
	token      int32
	start, end int
}

// partition is llama.cpp's tokenizer_st_partition: each special token, longest
// first, is cut out of every raw fragment left by the ones before it. The
// order matters (it is not a leftmost-longest scan): with tokens "ab" and
// "bcd", "abcd" yields "a" + <bcd>.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{token: null, start: 0, end: len(text)}}
	var present [256]bool
	for i := 0; i < len(text); i++ {
		present[text[i]] = true
	}
	var next []fragment
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.tokens[id]
		if tok == "" || !present[tok[0]] || len(tok) > len(text) {
			continue
		}
		next = next[:0]
		for _, fr := range frags {
			if fr.token != null {
				next = append(next, fr)
				continue
			}
			base, end := fr.start, fr.end
			for base < end {
				i := strings.Index(text[base:end], tok)
				if i < 0 {
					break
				}
				m := base + i
				left := m
				if a&attrLStrip != 0 {
					for left > base && isCSpace(text[left-1]) {
						left--
					}
				}
				if left > base {
					next = append(next, fragment{token: null, start: base, end: left})
				}
				next = append(next, fragment{token: id, start: m, end: m + len(tok)})
				base = m + len(tok)
				if a&attrRStrip != 0 {
					for base < end && isCSpace(text[base]) {
						base++
					}
				}
			}
			if base < end {
				next = append(next, fragment{token: null, start: base, end: end})
			}
		}
		frags, next = next, frags
	}
	return frags
}

// isCSpace is C's isspace in the "C" locale, which llama.cpp strips with.
func isCSpace(b byte) bool { return b == ' ' || (b >= '\t' && b <= '\r') }
