package distill

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"dovetail/cpu"
	"dovetail/models/draft"
)

// tokenizer is what the corpus is split with.
type tokenizer interface {
	Encode(text string, bos, eos bool) []int
}

// corpusData is the tokenized corpus: segments of at most the target's
// context, each one target pass. Features are computed per segment as
// training reaches it, never for the whole corpus at once.
type corpusData struct {
	segs                          [][]int
	train, eval                   []int // segment indices
	trainPositions, evalPositions int
	seqLen                        int
}

// windowsOf splits a segment of n tokens into training windows of seqLen
// positions (seqLen+1 tokens, consecutive windows sharing one token);
// windows of fewer than 2 positions are dropped.
func windowsOf(n, seqLen int) [][2]int {
	var w [][2]int
	for lo := 0; lo+2 < n; lo += seqLen {
		w = append(w, [2]int{lo, min(lo+seqLen+1, n)})
	}
	return w
}

func prepareData(docs []string, tok tokenizer, ctxLen, seqLen int, evalFrac float64) *corpusData {
	d := &corpusData{seqLen: seqLen}
	for _, doc := range docs {
		toks := tok.Encode(doc, true, false)
		for lo := 0; lo < len(toks); lo += ctxLen {
			if seg := toks[lo:min(lo+ctxLen, len(toks))]; len(seg) >= 3 {
				d.segs = append(d.segs, seg)
			}
		}
	}
	every := 0
	if evalFrac > 0 && len(d.segs) >= 2 {
		every = max(2, int(math.Round(1/evalFrac)))
	}
	for i, seg := range d.segs {
		pos := 0
		for _, w := range windowsOf(len(seg), seqLen) {
			pos += w[1] - w[0] - 1
		}
		if every > 0 && i%every == every-1 {
			d.eval = append(d.eval, i)
			d.evalPositions += pos
		} else {
			d.train = append(d.train, i)
			d.trainPositions += pos
		}
	}
	return d
}

// order is the training segments in epoch's shuffled order.
func (d *corpusData) order(epoch int, seed uint64) []int {
	o := slices.Clone(d.train)
	rng := rand.New(rand.NewPCG(seed, uint64(epoch)+1))
	rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
	return o
}

// stepsFor counts the optimizer steps of epochs passes, packing windows
// into batches as training does.
func (d *corpusData) stepsFor(epochs float64, batch, seqLen int, seed uint64) int {
	steps := 0
	full := int(epochs)
	for e := 0; e <= full; e++ {
		share := 1.0
		if e == full {
			share = epochs - float64(full)
			if share <= 0 {
				break
			}
		}
		n, inEpoch := 0, 0
		var counts []int
		for _, si := range d.order(e, seed) {
			for _, w := range windowsOf(len(d.segs[si]), seqLen) {
				T := w[1] - w[0] - 1
				if n+T > batch {
					counts = append(counts, n)
					n = 0
				}
				n += T
			}
		}
		if n > 0 {
			counts = append(counts, n)
		}
		inEpoch = int(math.Ceil(share * float64(len(counts))))
		steps += inEpoch
	}
	return max(1, steps)
}

// produce sends the windows of segments in order, with the target's
// features, skipping the first skip windows.
func (d *corpusData) produce(ctx context.Context, target *cpu.Target, order []int, seqLen, skip int, out chan<- draft.Window) error {
	for _, si := range order {
		seg := d.segs[si]
		ws := windowsOf(len(seg), seqLen)
		if skip >= len(ws) {
			skip -= len(ws)
			continue
		}
		feats, err := segmentFeatures(target, seg)
		if err != nil {
			return err
		}
		for _, w := range ws[skip:] {
			win := draft.Window{Tokens: seg[w[0]:w[1]], Features: feats[w[0]:w[1]]}
			select {
			case out <- win:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		skip = 0
	}
	return nil
}

// segmentFeatures runs the target over a segment from an empty context
// and copies out every position's final hidden state.
func segmentFeatures(target *cpu.Target, seg []int) ([][]float32, error) {
	if err := target.Truncate(0); err != nil {
		return nil, err
	}
	_, hid, err := target.ForwardFeatures(seg)
	if err != nil {
		return nil, fmt.Errorf("target forward: %w", err)
	}
	feats := make([][]float32, len(hid))
	for i, h := range hid {
		feats[i] = slices.Clone(h)
	}
	return feats, nil
}

// evalWindows computes the held-out windows with features, up to about
// limit positions.
func (d *corpusData) evalWindows(target *cpu.Target, seqLen, limit int) ([]draft.Window, error) {
	var out []draft.Window
	n := 0
	for _, si := range d.eval {
		if n >= limit {
			break
		}
		seg := d.segs[si]
		feats, err := segmentFeatures(target, seg)
		if err != nil {
			return nil, err
		}
		for _, w := range windowsOf(len(seg), seqLen) {
			out = append(out, draft.Window{Tokens: seg[w[0]:w[1]], Features: feats[w[0]:w[1]]})
			n += w[1] - w[0] - 1
		}
	}
	return out, nil
}

// docSeparator separates documents in a corpus file (TinyStories' own).
const docSeparator = "<|endoftext|>"

// readCorpus reads a text file, or every regular file under a directory
// (in name order, hidden ones skipped), as documents.
func readCorpus(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var files []string
	if st.IsDir() {
		err := filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(e.Name(), ".") && p != path {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if e.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		sort.Strings(files)
	} else {
		files = []string{path}
	}
	var docs []string
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		docs = append(docs, splitDocs(string(b))...)
	}
	return docs, nil
}

func splitDocs(text string) []string {
	var docs []string
	for _, d := range strings.Split(text, docSeparator) {
		if d = strings.TrimSpace(d); d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}
