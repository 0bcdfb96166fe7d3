package cli

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// screen is what a terminal shows of the wrapper's output: it moves the
// cursor left (ESC [ n D), clears to the end of the line (ESC [ K) and
// starts lines at \n.
func screen(t *testing.T, out string) []string {
	t.Helper()
	lines := [][]rune{nil}
	col := 0 // in runes: the tests' wide runes are counted by cols below
	csi := regexp.MustCompile(`^\x1b\[(\d*)([DK])`)
	for len(out) > 0 {
		if m := csi.FindStringSubmatch(out); m != nil {
			cur := &lines[len(lines)-1]
			if m[2] == "K" {
				*cur = (*cur)[:col]
			} else {
				n, _ := strconv.Atoi(m[1])
				for n > 0 && col > 0 { // n columns: a wide rune is two
					col--
					n -= runeCols((*cur)[col])
				}
			}
			out = out[len(m[0]):]
			continue
		}
		r := []rune(out)[0]
		out = out[len(string(r)):]
		if r == '\x1b' {
			t.Fatalf("an escape the screen does not know: %q", out)
		}
		if r == '\n' {
			lines, col = append(lines, nil), 0
			continue
		}
		cur := &lines[len(lines)-1]
		if col < len(*cur) {
			(*cur)[col] = r
		} else {
			*cur = append(*cur, r)
		}
		col++
	}
	var s []string
	for _, l := range lines {
		s = append(s, string(l))
	}
	return s
}

func cols(s string) int {
	n := 0
	for _, r := range s {
		n += runeCols(r)
	}
	return n
}

// A reply streamed in pieces at odd widths: no line wider than the width,
// no word broken unless it is longer than a line, no word lost.
func TestWrapperBreaksBetweenWords(t *testing.T) {
	text := "Once upon a time, there was a little girl named Lily. She loved to play outside " +
		"in the park with her supercalifragilisticexpialidocious friend 日本語の友達 and a dog."
	for _, width := range []int{1, 2, 7, 13, 20, 33, 80} {
		for _, piece := range []int{1, 3, 1000} {
			var b strings.Builder
			w := newWrapper(&b, width)
			for rs := []rune(text); len(rs) > 0; {
				n := min(piece, len(rs))
				w.WriteString(string(rs[:n]))
				rs = rs[n:]
			}
			lines := screen(t, b.String())
			for _, l := range lines {
				if c := cols(l); c > max(width, 2) {
					t.Fatalf("width %d, pieces of %d: line %q has %d columns", width, piece, l, c)
				}
			}
			got := strings.Fields(strings.Join(lines, " "))
			want := strings.Fields(text)
			if width >= 34 && strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("width %d, pieces of %d: words %q, want %q", width, piece, got, want)
			}
			// Narrower, only the long word may be broken: joined back,
			// the text is whole.
			if strings.Join(got, "") != strings.Join(want, "") {
				t.Errorf("width %d, pieces of %d: text %q", width, piece, strings.Join(lines, "|"))
			}
		}
	}
}

// A word that would cross the edge moves to the next line whole; one
// longer than a line is broken where the line ends.
func TestWrapperCases(t *testing.T) {
	for _, c := range []struct {
		width int
		in    string
		want  []string
	}{
		{10, "aaaa bbbbbb", []string{"aaaa ", "bbbbbb"}},
		{10, "aaaa bbbbb", []string{"aaaa bbbbb"}},
		{10, "aaaa bbbbbb cc", []string{"aaaa ", "bbbbbb cc"}},
		{5, "abcdefghij", []string{"abcde", "fghij"}},
		{5, "ab cdefghij", []string{"ab ", "cdefg", "hij"}},
		{6, "one\ntwo three", []string{"one", "two ", "three"}},
		{5, "日本語です", []string{"日本", "語で", "す"}},
		{4, "ab 日本", []string{"ab ", "日本"}},
		{3, "a b c d", []string{"a b", "c d"}},
	} {
		var b strings.Builder
		newWrapper(&b, c.width).WriteString(c.in)
		if got := screen(t, b.String()); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q at %d: %q, want %q", c.in, c.width, got, c.want)
		}
	}
}
