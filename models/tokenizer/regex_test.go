package tokenizer

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func randomText(r *rand.Rand, alphabet []string, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return sb.String()
}

// TestEngineMatchesGoRegexp compares the engine with Go's regexp on patterns
// both support. Go promises the match a backtracking engine would choose,
// which is ECMAScript's; classes are spelled out because the two disagree on
// \s (Go's lacks \v).
func TestEngineMatchesGoRegexp(t *testing.T) {
	patterns := []string{
		`'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\t\n\v\f\r A-Za-z0-9]+|[\t\n\v\f\r ]+`,
		`[A-Za-z]+|[0-9]{1,3}|[^A-Za-z0-9]`,
		`(?:ab|a)(?:bc|b)?c*|x{2,3}|y{2,}`,
		`a*?b|c+?d|e??f`,
		`(a|ab)(c|bcd)(d*)`,
		`[^a-c]+|[a-c]`,
		`(?:a|b)+c|[ab]`,
		`$|ab`,
	}
	alphabet := []string{"a", "b", "c", "d", "e", "f", "x", "y", "A", "Z", "0", "7", " ", "\t", "\n", "'", "s", "t", "l", "v", "r", "!", ".", "é"}
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range patterns {
		ours, err := compileRegex(p)
		if err != nil {
			t.Fatal(err)
		}
		goRe := regexp.MustCompile(p)
		for range 2000 {
			s := randomText(r, alphabet, r.IntN(24))
			cpts := decodeCodepoints(s)
			subj := make([]int32, len(cpts))
			for i, c := range cpts {
				subj[i] = c
			}
			// Expected pieces: matches and the gaps between them, in runes.
			var want []int
			prev := 0
			for _, m := range goRe.FindAllStringIndex(s, -1) {
				a, b := len([]rune(s[:m[0]])), len([]rune(s[:m[1]]))
				if a > prev {
					want = append(want, a-prev)
				}
				if b > a {
					want = append(want, b-a)
				}
				prev = max(prev, b)
			}
			if len(cpts) > prev {
				want = append(want, len(cpts)-prev)
			}
			var got []int
			if len(cpts) > 0 {
				got = ours.split(subj, []int{len(cpts)})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pattern %q on %q: got %v, want %v", p, s, got, want)
			}
		}
	}
}

// TestFastPathsMatchRegex runs llama.cpp's hand-written GPT-2 and Llama 3
// splitters against the engine interpreting the same regexes the way
// llama.cpp's std::regex fallback would: the two must agree everywhere.
func TestFastPathsMatchRegex(t *testing.T) {
	alphabet := []string{"a", "Z", "é", "中", "ß", "3", "٣", "½", " ", " ", "\t", "\n", "\r", "\u3000", "\u00a0",
		"\u0085", "\v", "'", "s", "t", "r", "e", "v", "l", "m", "d", "S", "L", "!", ".", "~", "$", "🦙", "\u0301", "\u200d", "\x1c", "\x00"}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name string
		expr string
		fast func([]rune, []int) []int
	}{
		{"gpt2", reGPT2, splitGPT2},
		{"llama3", reLlama3, splitLlama3},
	} {
		re, err := compileRegex(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		for range 5000 {
			s := randomText(r, alphabet, r.IntN(20))
			cpts := decodeCodepoints(s)
			if len(cpts) == 0 {
				continue
			}
			// Two windows, as after an earlier split step.
			cut := r.IntN(len(cpts) + 1)
			windows := []int{cut, len(cpts) - cut}
			if cut == 0 {
				windows = windows[1:]
			} else if cut == len(cpts) {
				windows = windows[:1]
			}
			subj := &subjects{cpts: cpts}
			got := c.fast(cpts, windows)
			want := re.split(subj.collapsedView(), windows)
			if !slices.Equal(got, want) {
				t.Fatalf("%s on %q windows %v: fast path %v, regex %v", c.name, s, windows, got, want)
			}
		}
	}
}

func TestRegexErrors(t *testing.T) {
	for _, p := range []string{`(a`, `[a`, `a{2,1}`, `\p{Xx}`, `(?<a>b)`, `\1`, `*a`, `[b-a]`} {
		if _, err := compileRegex(p); err == nil {
			t.Errorf("%q compiled", p)
		}
	}
}

// TestAllPreTokenizersCompile guards the table: every listed pattern must
// be one the engine understands, since a failure would only show when a
// model using it is loaded.
func TestAllPreTokenizersCompile(t *testing.T) {
	for name, p := range preTokenizers {
		sp, err := newSplitter(p.exprs)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		text := "Hello, y'all! 3333 \u4f60\u597d  🦙\n\n <sentinel:12> IMGIMGABZ"
		words := sp.split(decodeCodepoints(text))
		var joined []rune
		for _, w := range words {
			joined = append(joined, w...)
		}
		if string(joined) != text {
			t.Errorf("%s: words do not cover the text: %q", name, words)
		}
	}
}
