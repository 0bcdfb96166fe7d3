package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// wrapper writes a streamed reply in lines of at most width columns,
// breaking them between words as ollama does: text goes out as it comes,
// and a word that would cross the edge is taken back (the cursor moved
// left over it, the rest of the line cleared) and written again on the
// next line. A word longer than a line is broken where the line ends. It
// writes to a terminal only: taking back needs the cursor movements.
type wrapper struct {
	w     io.Writer
	width int
	col   int             // columns written on the current line
	word  strings.Builder // the current word, as far as it is on this line
	wcols int             // the columns of word
}

// newWrapper wraps at width columns (at least 1).
func newWrapper(w io.Writer, width int) *wrapper {
	return &wrapper{w: w, width: max(width, 1)}
}

// WriteString writes s, its lines broken between words.
func (w *wrapper) WriteString(s string) (int, error) {
	var b strings.Builder
	for _, r := range s {
		w.put(&b, r)
	}
	_, err := io.WriteString(w.w, b.String())
	return len(s), err
}

func (w *wrapper) put(b *strings.Builder, r rune) {
	switch {
	case r == '\n':
		b.WriteByte('\n')
		w.newLine()
	case r == '\r':
		b.WriteByte('\r')
		w.newLine()
	case r == ' ' || r == '\t':
		next := w.col + 1
		if r == '\t' {
			next = (w.col/8 + 1) * 8
		}
		w.endWord()
		if next > w.width {
			b.WriteByte('\n') // the space becomes the break
			w.newLine()
			return
		}
		b.WriteRune(r)
		w.col = next
	default:
		cols := runeCols(r)
		if w.col+cols > w.width && w.col > 0 {
			w.wrap(b, cols)
		}
		b.WriteRune(r)
		w.word.WriteRune(r)
		w.col += cols
		w.wcols += cols
	}
}

// wrap starts a new line before a rune of cols columns: with the current
// word when the word began after a break and fits on a line, else (a word
// longer than a line) the word is broken here.
func (w *wrapper) wrap(b *strings.Builder, cols int) {
	if w.wcols == 0 || w.wcols == w.col || w.wcols+cols > w.width {
		b.WriteByte('\n')
		w.newLine()
		return
	}
	fmt.Fprintf(b, "\x1b[%dD\x1b[K\n%s", w.wcols, w.word.String())
	w.col = w.wcols
}

func (w *wrapper) newLine() {
	w.col = 0
	w.endWord()
}

func (w *wrapper) endWord() {
	w.word.Reset()
	w.wcols = 0
}

// runeCols is the columns a terminal gives r: two for East Asian wide
// and full-width characters, none for combining marks and controls.
func runeCols(r rune) int {
	switch {
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || unicode.IsControl(r) || r == '\u200b':
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}
