package distill

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"dovetail/engine"
)

// selfPrompts open the samples --self generates: story and dialogue
// openings, and nothing at all (BOS only).
var selfPrompts = []string{"", "Once upon a time", "One day", "Lily", "Tom and", "The little", "There was a",
	"Ben wanted", "It was a sunny day", "The cat", "The dog", "Mom said", "Timmy", "In a small town", "A bird",
	"Max and his", "Anna had a", "The big", "Sue found", "Jack", "Emma loved", "At the park", "The old man",
	"A girl named", "A boy named", "Every morning", "The king", "Once there was", "Sam and Mia", "The sun"}

// selfCorpus generates the --self samples, or reads them back from
// OUT.self.txt, where they are appended as they are made (so an
// interrupted run keeps them), saying which; --fresh makes them anew.
// Sample i is determined by i and the seed.
func (r *run) selfCorpus(ctx context.Context) ([]string, error) {
	o, tok, target := r.o, r.m.Tok, r.target
	path := o.Out + ".self.txt"
	docs, err := r.keptSamples(path)
	if err != nil {
		return nil, err
	}
	if len(docs) >= o.Self {
		r.info("using %d of the %d samples already in %s (--fresh makes new ones)", o.Self, len(docs), path)
		return docs[:o.Self], nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if len(docs) == 0 {
		flags |= os.O_TRUNC
	}
	file, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	bar := Progress{Phase: "self", Total: o.Self, Done: len(docs)}
	tokens := 0
	start := time.Now()
	for i := len(docs); i < o.Self; i++ {
		p := selfPrompts[i%len(selfPrompts)]
		// The first round of prompts decodes greedily; the rest sample at
		// temperatures spread evenly (golden-ratio steps) over [0, selfTemp].
		temp := float32(0)
		if i >= len(selfPrompts) {
			temp = o.SelfTemp * float32(math.Mod(float64(i)*0.6180339887, 1))
		}
		prompt := tok.Encode(p, true, false)
		if len(prompt) == 0 {
			prompt = []int{tok.BOS()}
		}
		var out []int
		req := engine.Request{Prompt: prompt, MaxTokens: min(o.SelfLen, target.Context()-len(prompt)-1),
			Sampler: engine.SamplerParams{Temperature: temp, TopK: 40, TopP: 0.95, Seed: uint64(o.Seed)*1_000_003 + uint64(i)},
			Stop:    tok.IsEOG}
		if _, err := engine.Generate(ctx, target, req, func(t int) error { out = append(out, t); return nil }); err != nil {
			bar.Finished = true
			r.progress(bar)
			if errors.Is(err, context.Canceled) {
				return nil, &Interrupted{SamplesKept: path, SamplesSoFar: i}
			}
			return nil, err
		}
		// Decoded together, so that the prompt and the continuation join
		// as the tokenizer would write them.
		body := slices.Clone(prompt)
		if len(body) > 0 && body[0] == tok.BOS() {
			body = body[1:]
		}
		text := strings.TrimSpace(tok.Decode(append(body, out...)))
		if strings.Contains(text, docSeparator) || text == "" {
			text = strings.ReplaceAll(text, docSeparator, "") + "."
		}
		if _, err := file.WriteString(text + "\n" + docSeparator + "\n"); err != nil {
			return nil, err
		}
		docs = append(docs, text)
		tokens += len(out)
		bar.Done, bar.Info = i+1, fmt.Sprintf("%.0f tokens/s", float64(tokens)/time.Since(start).Seconds())
		r.progress(bar)
	}
	bar.Finished = true
	r.progress(bar)
	return docs, nil
}

// keptSamples are the samples an earlier run left in path, which this
// one continues (none with --fresh, which starts the file over); each
// case is said in a line.
func (r *run) keptSamples(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	docs := splitDocs(string(b))
	switch {
	case len(docs) == 0:
	case r.o.Fresh:
		r.info("replacing the %d samples in %s with new ones (--fresh)", len(docs), path)
		return nil, nil
	case len(docs) < r.o.Self:
		r.info("continuing the %d samples already in %s: %d more to make (--fresh starts them over)", len(docs), path, r.o.Self-len(docs))
	}
	return docs, nil
}
