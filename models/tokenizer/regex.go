package tokenizer

import (
	"fmt"
	"strconv"
)

// A small backtracking regex engine with ECMAScript semantics (ordered
// alternation, greedy quantifiers that backtrack, lookahead), which is what
// llama.cpp gets from std::regex. Go's regexp has neither lookahead nor
// leftmost-first backtracking, and a third-party engine would bring its own
// idea of \s and \p{..}; here those classes are defined exactly as llama.cpp
// sees them (see subject building in pretokenize.go).
//
// Patterns run over a subject of int32 "symbols", not text: either raw
// codepoints or llama.cpp's collapsed category codes.

// Collapsed category codes: llama.cpp replaces every non-ASCII codepoint by
// one byte naming its category before running a pattern that uses \p{..}.
const (
	collapsedOther  = 0xD0
	collapsedNumber = 0xD1
	collapsedLetter = 0xD2
	collapsedPunct  = 0xD3
	collapsedMark   = 0xD4
	collapsedSymbol = 0xD5
	// Non-ASCII whitespace becomes a vertical tab so that std::regex's
	// ASCII-only \s still matches it.
	collapsedSpace = 0x0B
)

type reOp uint8

const (
	opClass reOp = iota
	opSeq
	opAlt
	opRepeat
	opLook
	opBegin
	opEnd
)

type reNode struct {
	op   reOp
	cls  *reClass
	kids []*reNode
	min  int
	max  int // -1: unbounded
	lazy bool
	neg  bool // opLook: negative lookahead
}

type reRange struct{ lo, hi int32 }

type reClass struct {
	neg    bool
	ranges []reRange
}

func (c *reClass) has(v int32) bool {
	in := false
	for _, r := range c.ranges {
		if v >= r.lo && v <= r.hi {
			in = true
			break
		}
	}
	return in != c.neg
}

// Class contents for the escapes. \s is std::regex's C-locale isspace.
var (
	clsSpace = []reRange{{9, 13}, {32, 32}}
	clsDigit = []reRange{{'0', '9'}}
	clsWord  = []reRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
)

// categoryRanges is what llama.cpp substitutes for \p{X}: the collapsed code
// plus a hand-written ASCII list. The lists are taken as they are, quirks
// included: '~' is not in \p{S} there although Unicode says it is.
func categoryRanges(name string) ([]reRange, bool) {
	switch name {
	case "N":
		return []reRange{{collapsedNumber, collapsedNumber}, {'0', '9'}}, true
	case "L", "Lu", "Ll", "Lt", "Lm", "Lo":
		return []reRange{{collapsedLetter, collapsedLetter}, {'A', 'Z'}, {'a', 'z'}}, true
	case "P":
		return []reRange{{collapsedPunct, collapsedPunct}, {0x21, 0x23}, {0x25, 0x2A}, {0x2C, 0x2F},
			{0x3A, 0x3B}, {0x3F, 0x40}, {0x5B, 0x5D}, {0x5F, 0x5F}, {0x7B, 0x7B}, {0x7D, 0x7D}}, true
	case "M":
		return []reRange{{collapsedMark, collapsedMark}}, true
	case "S":
		return []reRange{{collapsedSymbol, collapsedSymbol}, {0x24, 0x24}, {0x2B, 0x2B}, {0x3C, 0x3E},
			{0x5E, 0x5E}, {0x60, 0x60}, {0x7C, 0x7C}}, true
	}
	return nil, false
}

func complement(rs []reRange) []reRange {
	var out []reRange
	next := int32(0)
	for _, r := range sortRanges(rs) {
		if r.lo > next {
			out = append(out, reRange{next, r.lo - 1})
		}
		if r.hi+1 > next {
			next = r.hi + 1
		}
	}
	return append(out, reRange{next, 0x7FFFFFFF})
}

func sortRanges(rs []reRange) []reRange {
	out := append([]reRange(nil), rs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].lo < out[j-1].lo; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// regex is a compiled pattern. usesCategories says whether it has \p{..},
// which decides the subject it must run over.
type regex struct {
	src            string
	root           *reNode
	usesCategories bool
}

type reParser struct {
	src  []rune
	pos  int
	cats bool
}

func compileRegex(src string) (*regex, error) {
	p := &reParser{src: []rune(src)}
	n, err := p.alt()
	if err == nil && p.pos < len(p.src) {
		err = p.errf("unexpected %q", p.src[p.pos])
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: regex %q: %w", src, err)
	}
	return &regex{src: src, root: n, usesCategories: p.cats}, nil
}

func (p *reParser) errf(format string, args ...any) error {
	return fmt.Errorf("at %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *reParser) more() bool { return p.pos < len(p.src) }
func (p *reParser) peek() rune { return p.src[p.pos] }

func (p *reParser) alt() (*reNode, error) {
	var alts []*reNode
	for {
		s, err := p.seq()
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		if !p.more() || p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &reNode{op: opAlt, kids: alts}, nil
}

func (p *reParser) seq() (*reNode, error) {
	var items []*reNode
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		a, err := p.atom()
		if err != nil {
			return nil, err
		}
		if a, err = p.quantifier(a); err != nil {
			return nil, err
		}
		items = append(items, a)
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return &reNode{op: opSeq, kids: items}, nil
}

func (p *reParser) atom() (*reNode, error) {
	c := p.peek()
	p.pos++
	switch c {
	case '(':
		look, neg := false, false
		if p.pos+1 < len(p.src) && p.src[p.pos] == '?' {
			switch p.src[p.pos+1] {
			case ':':
			case '=':
				look = true
			case '!':
				look, neg = true, true
			default:
				return nil, p.errf("unsupported group (?%c", p.src[p.pos+1])
			}
			p.pos += 2
		}
		inner, err := p.alt()
		if err != nil {
			return nil, err
		}
		if !p.more() || p.peek() != ')' {
			return nil, p.errf("missing )")
		}
		p.pos++
		if look {
			return &reNode{op: opLook, kids: []*reNode{inner}, neg: neg}, nil
		}
		return inner, nil
	case '[':
		return p.class()
	case '.':
		return &reNode{op: opClass, cls: &reClass{neg: true, ranges: []reRange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}}}, nil
	case '^':
		return &reNode{op: opBegin}, nil
	case '$':
		return &reNode{op: opEnd}, nil
	case '\\':
		rs, neg, _, err := p.escape()
		if err != nil {
			return nil, err
		}
		return &reNode{op: opClass, cls: &reClass{neg: neg, ranges: rs}}, nil
	case '*', '+', '?', '{', ')':
		return nil, p.errf("unexpected %q", c)
	}
	return &reNode{op: opClass, cls: &reClass{ranges: []reRange{{c, c}}}}, nil
}

// escape parses what follows a backslash: a single character, or a class
// shorthand (isClass), possibly negated (\S, \D, \W, \P{..}), which inside
// a bracket must be folded in by the caller.
func (p *reParser) escape() (rs []reRange, neg, isClass bool, err error) {
	if !p.more() {
		return nil, false, false, p.errf("trailing backslash")
	}
	c := p.peek()
	p.pos++
	single := func(v rune) ([]reRange, bool, bool, error) { return []reRange{{v, v}}, false, false, nil }
	switch c {
	case 's':
		return clsSpace, false, true, nil
	case 'S':
		return clsSpace, true, true, nil
	case 'd':
		return clsDigit, false, true, nil
	case 'D':
		return clsDigit, true, true, nil
	case 'w':
		return clsWord, false, true, nil
	case 'W':
		return clsWord, true, true, nil
	case 'p', 'P':
		if !p.more() || p.peek() != '{' {
			return nil, false, false, p.errf("\\p without {")
		}
		end := p.pos
		for end < len(p.src) && p.src[end] != '}' {
			end++
		}
		if end == len(p.src) {
			return nil, false, false, p.errf("unterminated \\p{")
		}
		name := string(p.src[p.pos+1 : end])
		rs, ok := categoryRanges(name)
		if !ok {
			return nil, false, false, p.errf("unsupported category \\p{%s}", name)
		}
		p.pos = end + 1
		p.cats = true
		return rs, c == 'P', true, nil
	case 'n':
		return single('\n')
	case 'r':
		return single('\r')
	case 't':
		return single('\t')
	case 'f':
		return single('\f')
	case 'v':
		return single('\v')
	case '0':
		return single(0)
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if p.pos+n > len(p.src) {
			return nil, false, false, p.errf("short \\%c escape", c)
		}
		v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil {
			return nil, false, false, p.errf("bad \\%c escape", c)
		}
		p.pos += n
		return single(rune(v))
	case 'b', 'B':
		return nil, false, false, p.errf("unsupported \\%c", c)
	}
	if c >= '1' && c <= '9' {
		return nil, false, false, p.errf("backreferences are not supported")
	}
	return single(c)
}

func (p *reParser) class() (*reNode, error) {
	cls := &reClass{}
	if p.more() && p.peek() == '^' {
		cls.neg = true
		p.pos++
	}
	first := true
	for {
		if !p.more() {
			return nil, p.errf("unterminated [")
		}
		c := p.peek()
		if c == ']' && !first {
			p.pos++
			break
		}
		first = false
		lo, isChar, err := p.classAtom(cls)
		if err != nil {
			return nil, err
		}
		if !isChar {
			continue
		}
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			hi, hiChar, err := p.classAtom(cls)
			if err != nil {
				return nil, err
			}
			if !hiChar {
				return nil, p.errf("class shorthand as range end")
			}
			if hi < lo {
				return nil, p.errf("range out of order")
			}
			cls.ranges = append(cls.ranges, reRange{lo, hi})
			continue
		}
		cls.ranges = append(cls.ranges, reRange{lo, lo})
	}
	return &reNode{op: opClass, cls: cls}, nil
}

// classAtom reads one bracket item. A shorthand class (\s, \p{L}) is added
// to cls directly and reported as not a single character.
func (p *reParser) classAtom(cls *reClass) (rune, bool, error) {
	c := p.peek()
	p.pos++
	if c != '\\' {
		return c, true, nil
	}
	if p.more() && p.peek() == 'b' {
		p.pos++
		return '\b', true, nil
	}
	rs, neg, isClass, err := p.escape()
	if err != nil {
		return 0, false, err
	}
	if !isClass {
		return rs[0].lo, true, nil
	}
	if neg {
		rs = complement(rs)
	}
	cls.ranges = append(cls.ranges, rs...)
	return 0, false, nil
}

func (p *reParser) quantifier(a *reNode) (*reNode, error) {
	if !p.more() {
		return a, nil
	}
	min, max := 0, 0
	switch p.peek() {
	case '*':
		min, max = 0, -1
	case '+':
		min, max = 1, -1
	case '?':
		min, max = 0, 1
	case '{':
		end := p.pos + 1
		for end < len(p.src) && p.src[end] != '}' {
			end++
		}
		if end == len(p.src) {
			return nil, p.errf("unterminated {")
		}
		body := string(p.src[p.pos+1 : end])
		var err error
		if min, max, err = parseBounds(body); err != nil {
			return nil, p.errf("bad quantifier {%s}", body)
		}
		p.pos = end
	default:
		return a, nil
	}
	p.pos++
	n := &reNode{op: opRepeat, kids: []*reNode{a}, min: min, max: max}
	if p.more() && p.peek() == '?' {
		n.lazy = true
		p.pos++
	}
	return n, nil
}

func parseBounds(body string) (int, int, error) {
	for i := 0; i < len(body); i++ {
		if body[i] == ',' {
			min, err := strconv.Atoi(body[:i])
			if err != nil {
				return 0, 0, err
			}
			if i == len(body)-1 {
				return min, -1, nil
			}
			max, err := strconv.Atoi(body[i+1:])
			if err != nil || max < min {
				return 0, 0, fmt.Errorf("bad bounds")
			}
			return min, max, nil
		}
	}
	n, err := strconv.Atoi(body)
	return n, n, err
}

// matcher runs one pattern over subject[begin:end]; positions outside that
// window do not exist for the pattern, as with std::regex_iterator over a
// sub-range (so (?!\S) succeeds at the window's end).
type matcher struct {
	s          []int32
	begin, end int
}

// matchAt returns the end of the first (ECMAScript-priority) match starting
// at i, or -1.
func (m *matcher) matchAt(root *reNode, i int) int {
	end := -1
	m.run(root, i, func(j int) bool { end = j; return true })
	return end
}

func (m *matcher) run(n *reNode, i int, k func(int) bool) bool {
	switch n.op {
	case opClass:
		if i < m.end && n.cls.has(m.s[i]) {
			return k(i + 1)
		}
		return false
	case opSeq:
		return m.seq(n.kids, i, k)
	case opAlt:
		for _, a := range n.kids {
			if m.run(a, i, k) {
				return true
			}
		}
		return false
	case opRepeat:
		if sub := n.kids[0]; sub.op == opClass {
			return m.repeatClass(n, sub.cls, i, k)
		}
		return m.repeat(n, i, 0, k)
	case opLook:
		found := m.run(n.kids[0], i, func(int) bool { return true })
		if found != n.neg {
			return k(i)
		}
		return false
	case opBegin:
		if i == m.begin {
			return k(i)
		}
		return false
	case opEnd:
		if i == m.end {
			return k(i)
		}
		return false
	}
	panic("tokenizer: bad regex node")
}

func (m *matcher) seq(kids []*reNode, i int, k func(int) bool) bool {
	if len(kids) == 0 {
		return k(i)
	}
	return m.run(kids[0], i, func(j int) bool { return m.seq(kids[1:], j, k) })
}

// repeatClass is the quantified single-character case, done with a loop so
// that long runs neither recurse deeply nor allocate.
func (m *matcher) repeatClass(n *reNode, cls *reClass, i int, k func(int) bool) bool {
	limit := m.end - i
	if n.max >= 0 && n.max < limit {
		limit = n.max
	}
	count := 0
	for count < limit && cls.has(m.s[i+count]) {
		count++
	}
	if count < n.min {
		return false
	}
	if n.lazy {
		for c := n.min; c <= count; c++ {
			if k(i + c) {
				return true
			}
		}
		return false
	}
	for c := count; c >= n.min; c-- {
		if k(i + c) {
			return true
		}
	}
	return false
}

func (m *matcher) repeat(n *reNode, i, count int, k func(int) bool) bool {
	canMore := n.max < 0 || count < n.max
	more := func() bool {
		return m.run(n.kids[0], i, func(j int) bool {
			// ECMAScript stops an iteration that consumed nothing once the
			// minimum is met; without this, (a*)* would loop forever.
			if j == i && count >= n.min {
				return false
			}
			return m.repeat(n, j, count+1, k)
		})
	}
	if count < n.min {
		return more()
	}
	if n.lazy {
		return k(i) || (canMore && more())
	}
	return (canMore && more()) || k(i)
}

// split cuts each window of the subject into the pieces std::regex_iterator
// would yield: every match, and every unmatched gap between matches.
func (re *regex) split(subject []int32, windows []int) []int {
	var out []int
	start := 0
	for _, w := range windows {
		m := matcher{s: subject, begin: start, end: start + w}
		prev := start
		for pos := start; pos <= m.end; {
			e := m.matchAt(re.root, pos)
			if e < 0 {
				pos += re.skipAfterFailure(&m, pos)
				continue
			}
			if pos > prev {
				out = append(out, pos-prev)
			}
			if e > pos {
				out = append(out, e-pos)
				prev = e
				pos = e
			} else {
				prev = pos
				pos++
			}
		}
		if m.end > prev {
			out = append(out, m.end-prev)
		}
		start += w
	}
	return out
}

// skipAfterFailure says how far the search may move on after no match starts
// at pos. When the pattern opens with a class repeated at least once, an
// attempt at pos already tried every end of that run the pattern could use
// from any later start inside the run, and what follows the run depends only
// on where it starts; so no start inside the run can match either. Without
// this, \s+$ over a long run of spaces not at the end is quadratic.
func (re *regex) skipAfterFailure(m *matcher, pos int) int {
	first := re.root
	if first.op == opSeq {
		first = first.kids[0]
	}
	if first.op != opRepeat || first.min < 1 || first.kids[0].op != opClass {
		return 1
	}
	cls := first.kids[0].cls
	run := 0
	for pos+run < m.end && cls.has(m.s[pos+run]) {
		run++
	}
	return max(run, 1)
}
