package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// The pre-tokenizer cuts text into words before BPE merges run, so that no
// merge crosses a word boundary. llama.cpp names each variant in
// tokenizer.ggml.pre and maps it to a list of regexes applied in sequence,
// each one cutting the pieces the previous one left. The strings below are
// llama.cpp's, character for character: two of them are recognised by exact
// text and replaced with hand-written splitters (as llama.cpp does), and the
// rest run on the engine in regex.go.

const (
	reGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	// llama.cpp writes the case-insensitive group of the original Llama 3
	// pattern out longhand because std::regex lacks (?i:...).
	reLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reTekken = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reGPT4o  = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	rePoro   = ` ?[^(\s|.,!?…。，、।۔،)]+`
)

// preTokenizer is one named variant. The flags are the per-variant settings
// llama.cpp's vocab loader switches on together with the regexes.
type preTokenizer struct {
	exprs        []string
	ignoreMerges bool // take a word whole when it is a vocabulary entry
	addBOS       bool // default for tokenizer.ggml.add_bos_token
}

var preTokenizers = map[string]preTokenizer{}

func definePre(p preTokenizer, names ...string) {
	for _, n := range names {
		preTokenizers[n] = p
	}
}

func init() {
	definePre(preTokenizer{exprs: []string{
		`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`,
	}}, "default")
	definePre(preTokenizer{exprs: []string{reLlama3}, ignoreMerges: true, addBOS: true},
		"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral")
	definePre(preTokenizer{exprs: []string{reLlama3}}, "dbrx", "smaug-bpe", "chatglm-bpe", "glm4")
	// Six codepoints of the second pattern are written as \u escapes: they
	// are singletons that Unicode normalization (NFC) replaces, and a copy
	// through a normalizing tool would silently change the ranges.
	definePre(preTokenizer{exprs: []string{
		"[\r\n]",
		`\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+`,
		`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
		`\s+$`,
		`[一-龥ࠀ-一가-퟿]+`,
		`\p{N}+`,
	}}, "deepseek-llm")
	definePre(preTokenizer{exprs: []string{
		"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`,
	}}, "deepseek-coder")
	definePre(preTokenizer{exprs: []string{
		`\p{N}{1,3}`,
		`[一-龥぀-ゟ゠-ヿ]+`,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
	}}, "deepseek-v3")
	definePre(preTokenizer{exprs: []string{
		`[\p{P}\$\+<=>\^~\|` + "`" + `]+`, reGPT2, `[0-9][0-9][0-9]`,
	}}, "falcon")
	definePre(preTokenizer{exprs: []string{`\p{N}`, reGPT2}},
		"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b")
	definePre(preTokenizer{exprs: []string{reGPT2}},
		"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
		"jina-v2-de", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais")
	definePre(preTokenizer{exprs: []string{reQwen2}}, "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez")
	definePre(preTokenizer{exprs: []string{rePoro}}, "poro-chat", "bloom", "gpt3-finnish")
	definePre(preTokenizer{exprs: []string{rePoro, `\p{N}`}}, "viking")
	definePre(preTokenizer{exprs: []string{reTekken}, ignoreMerges: true, addBOS: true}, "tekken")
	definePre(preTokenizer{exprs: []string{reGPT4o}}, "gpt-4o")
	definePre(preTokenizer{exprs: []string{
		`<sentinel:[0-9]+>`,
		`(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`,
		`([\t\n]|    |  )`,
		`\p{N}`,
		`[\p{P}!-/:-@\[-` + "`" + `{-~]`,
		reGPT2,
	}, addBOS: true}, "chameleon")
}

func supportedPreTokenizers() string {
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// splitter is a compiled pre-tokenizer: one step per regex.
type splitter struct {
	steps []func(cpts []rune, subj *subjects, windows []int) []int
}

// subjects holds the two views of the text llama.cpp's std::regex fallback
// runs over, built lazily since the hand-written splitters need neither.
type subjects struct {
	cpts            []rune
	collapsed, wide []int32
}

// collapsedView replaces each non-ASCII codepoint by its category code, the
// only way llama.cpp can express \p{..} to std::regex.
func (s *subjects) collapsedView() []int32 {
	if s.collapsed == nil {
		s.collapsed = make([]int32, len(s.cpts))
		for i, c := range s.cpts {
			s.collapsed[i] = collapse(c)
		}
	}
	return s.collapsed
}

// wideView is the codepoints with non-ASCII whitespace turned into a
// vertical tab, so that std::wregex's ASCII-only \s sees it; a literal class
// naming such a codepoint (U+3000 in deepseek-llm's) therefore never matches.
func (s *subjects) wideView() []int32 {
	if s.wide == nil {
		s.wide = make([]int32, len(s.cpts))
		for i, c := range s.cpts {
			if c > 0x7F && isWhitespace(c) {
				c = collapsedSpace
			}
			s.wide[i] = c
		}
	}
	return s.wide
}

func collapse(c rune) int32 {
	if c >= 0 && c < 128 {
		return c
	}
	if isWhitespace(c) {
		return collapsedSpace
	}
	switch category(c) {
	case catNumber:
		return collapsedNumber
	case catLetter:
		return collapsedLetter
	case catPunct:
		return collapsedPunct
	case catMark:
		return collapsedMark
	case catSymbol:
		return collapsedSymbol
	}
	return collapsedOther
}

func newSplitter(exprs []string) (*splitter, error) {
	sp := &splitter{}
	for _, e := range exprs {
		switch e {
		case reGPT2:
			sp.steps = append(sp.steps, func(c []rune, _ *subjects, w []int) []int { return splitGPT2(c, w) })
			continue
		case reLlama3:
			sp.steps = append(sp.steps, func(c []rune, _ *subjects, w []int) []int { return splitLlama3(c, w) })
			continue
		}
		re, err := compileRegex(e)
		if err != nil {
			return nil, err
		}
		if re.usesCategories {
			sp.steps = append(sp.steps, func(_ []rune, s *subjects, w []int) []int { return re.split(s.collapsedView(), w) })
		} else {
			sp.steps = append(sp.steps, func(_ []rune, s *subjects, w []int) []int { return re.split(s.wideView(), w) })
		}
	}
	return sp, nil
}

// split returns the words of text as codepoint slices of cpts.
func (sp *splitter) split(cpts []rune) [][]rune {
	windows := []int{len(cpts)}
	subj := &subjects{cpts: cpts}
	for _, step := range sp.steps {
		windows = step(cpts, subj, windows)
	}
	words := make([][]rune, 0, len(windows))
	start := 0
	for _, w := range windows {
		words = append(words, cpts[start:start+w])
		start += w
	}
	return words
}

// cursor gives the hand-written splitters llama.cpp's view of one window:
// reads outside it yield no codepoint and flags that match nothing.
type cursor struct {
	cpts       []rune
	begin, end int
}

const outOfRange = -1

func (c *cursor) cpt(i int) rune {
	if i >= c.begin && i < c.end {
		return c.cpts[i]
	}
	return outOfRange
}

func (c *cursor) flags(i int) cptFlags {
	if i >= c.begin && i < c.end {
		return flagsOf(c.cpts[i])
	}
	return cptFlags{outside: true}
}

// classless reports a codepoint in [^\s\p{L}\p{N}] for llama.cpp's splitters,
// which test that with "no letter, number or space flag, and some flag set";
// only a position outside the window has no flag set.
func classless(f cptFlags) bool {
	return !f.outside && !f.whitespace && f.cat != catLetter && f.cat != catNumber
}

// splitGPT2 is llama.cpp's unicode_regex_split_custom_gpt2, the fast path for
// reGPT2.
func splitGPT2(cpts []rune, windows []int) []int {
	var out []int
	start := 0
	for _, w := range windows {
		c := cursor{cpts: cpts, begin: start, end: start + w}
		start += w
		prev := c.begin
		add := func(end int) int {
			n := end - prev
			if n > 0 {
				out = append(out, n)
			}
			prev = end
			return n
		}
		for pos := c.begin; pos < c.end; {
			cpt := c.cpt(pos)
			f := c.flags(pos)
			if cpt == '\'' && pos+1 < c.end {
				next := c.cpt(pos + 1)
				if next == 's' || next == 't' || next == 'm' || next == 'd' {
					pos += add(pos + 2)
					continue
				}
				if pos+2 < c.end {
					nn := c.cpt(pos + 2)
					if (next == 'r' && nn == 'e') || (next == 'v' && nn == 'e') || (next == 'l' && nn == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}
			f2 := f
			if cpt == ' ' {
				f2 = c.flags(pos + 1)
			}
			if f2.letter() {
				if cpt == ' ' {
					pos++
				}
				for f2.letter() {
					pos++
					f2 = c.flags(pos)
				}
				add(pos)
				continue
			}
			if f2.number() {
				if cpt == ' ' {
					pos++
				}
				for f2.number() {
					pos++
					f2 = c.flags(pos)
				}
				add(pos)
				continue
			}
			if classless(f2) {
				if cpt == ' ' {
					pos++
				}
				for classless(f2) {
					pos++
					f2 = c.flags(pos)
				}
				add(pos)
				continue
			}
			nws := 0
			for c.flags(pos + nws).whitespace {
				nws++
			}
			if nws > 1 && c.cpt(pos+nws) != outOfRange {
				pos += nws - 1
				add(pos)
				continue
			}
			if nws > 0 {
				pos += nws
				add(pos)
				continue
			}
			pos++
			add(pos)
		}
	}
	return out
}

// splitLlama3 is llama.cpp's unicode_regex_split_custom_llama3, the fast path
// for reLlama3: each piece is the first of the regex's alternatives that
// matches where the last one ended.
func splitLlama3(cpts []rune, windows []int) []int {
	var out []int
	start := 0
	for _, w := range windows {
		c := cursor{cpts: cpts, begin: start, end: start + w}
		start += w
		prev := c.begin
		add := func(end int) {
			if n := end - prev; n > 0 {
				out = append(out, n)
			}
			prev = end
		}
		for pos := c.begin; pos < c.end; {
			if end, ok := llama3Contraction(&c, pos); ok {
				add(end)
				pos = end
				continue
			}
			if end, ok := llama3Letters(&c, pos); ok {
				add(end)
				pos = end
				continue
			}
			// \p{N}{1,3}
			if c.flags(pos).number() {
				ini := pos
				for c.flags(pos).number() {
					pos++
					if pos-ini >= 3 {
						add(pos)
						ini = pos
					}
				}
				add(pos)
				continue
			}
			if end, ok := llama3Punct(&c, pos); ok {
				add(end)
				pos = end
				continue
			}
			pos = llama3Space(&c, pos)
			add(pos)
		}
	}
	return out
}

// llama3Contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos.
func llama3Contraction(c *cursor, pos int) (end int, ok bool) {
	if c.cpt(pos) != '\'' || pos+1 >= c.end {
		return 0, false
	}
	next := asciiLower(c.cpt(pos + 1))
	if next == 's' || next == 't' || next == 'm' || next == 'd' {
		return pos + 2, true
	}
	if pos+2 < c.end {
		nn := asciiLower(c.cpt(pos + 2))
		if (next == 'r' && nn == 'e') || (next == 'v' && nn == 'e') || (next == 'l' && nn == 'l') {
			return pos + 3, true
		}
	}
	return 0, false
}

// llama3Letters matches [^\r\n\p{L}\p{N}]?\p{L}+ at pos.
func llama3Letters(c *cursor, pos int) (end int, ok bool) {
	cpt, f := c.cpt(pos), c.flags(pos)
	if cpt == '\r' || cpt == '\n' || f.number() || !f.letter() && !c.flags(pos+1).letter() {
		return 0, false
	}
	pos++
	for c.flags(pos).letter() {
		pos++
	}
	return pos, true
}

// llama3Punct matches <space>?[^\s\p{L}\p{N}]+[\r\n]* at pos.
func llama3Punct(c *cursor, pos int) (end int, ok bool) {
	cpt, f := c.cpt(pos), c.flags(pos)
	f2 := f
	if cpt == ' ' {
		f2 = c.flags(pos + 1)
	}
	// llama.cpp tests the current codepoint's flags for "some flag set"
	// here, not f2's: a lone trailing space enters this branch.
	if f2.whitespace || f2.letter() || f2.number() || f.outside {
		return 0, false
	}
	if cpt == ' ' {
		pos++
	}
	for classless(f2) {
		pos++
		f2 = c.flags(pos)
	}
	for c2 := c.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = c.cpt(pos) {
		pos++
	}
	return pos, true
}

// llama3Space matches \s*[\r\n]+, \s+(?!\S) or \s+ at pos, or else the
// one codepoint there, and returns where the match ends.
func llama3Space(c *cursor, pos int) int {
	nws, lastRN := 0, 0
	for c.flags(pos + nws).whitespace {
		if c2 := c.cpt(pos + nws); c2 == '\r' || c2 == '\n' {
			lastRN = pos + nws + 1
		}
		nws++
	}
	switch {
	case lastRN > 0: // \s*[\r\n]+
		return lastRN
	case nws > 1 && c.cpt(pos+nws) != outOfRange: // \s+(?!\S)
		return pos + nws - 1
	case nws > 0:
		return pos + nws
	}
	return pos + 1
}

func asciiLower(c rune) rune {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func unknownPreError(name string) error {
	return fmt.Errorf("tokenizer: unknown pre-tokenizer %q (tokenizer.ggml.pre); supported: %s", name, supportedPreTokenizers())
}
