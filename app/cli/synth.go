package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"dovetail/internal/sysmem"
	"dovetail/models/gguf"
	"dovetail/models/synth"
	"dovetail/quant"
)

func newSynthCmd() *cobra.Command {
	var shape, typ, vocab, out string
	var seed uint64
	c := &cobra.Command{
		Use:   "synth --shape SHAPE --type TYPE [--vocab VOCAB.gguf] -o FILE.gguf",
		Short: "Write a random-weight llama model of a realistic shape, for speed measurements",
		Long: "Write a random-weight llama model (its speed is real, its text is not) that dovetail and\n" +
			"llama.cpp both load. SHAPE is stories110M, tinyllama-1.1b, llama2-7b or\n" +
			"dim=…,layers=…,heads=…,ffn=…[,kv=…][,vocab=…][,ctx=…]. --vocab copies the tokenizer of\n" +
			"a GGUF (e.g. a vocabulary-only file); without it a byte-level stand-in is written.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{fmt.Errorf("synth: an output file is required (-o FILE.gguf)")}
			}
			sh, err := synth.ParseShape(shape)
			if err != nil {
				return usageError{err}
			}
			t, err := quant.ParseType(typ)
			if err != nil || !quant.CanQuantize(t) {
				return usageError{fmt.Errorf("synth: --type %q: want q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, f16, bf16 or f32", typ)}
			}
			opts := synth.Options{Type: t, Seed: seed}
			if vocab != "" {
				v, err := gguf.Open(vocab)
				if err != nil {
					return err
				}
				defer v.Close()
				opts.Vocab = v
			}
			if _, err := os.Stat(out); err == nil {
				return fmt.Errorf("synth: %s exists; remove it first (synth never overwrites a file)", out)
			}
			if err := fitsInMemory(sh, t); err != nil {
				return err
			}
			start := time.Now()
			w, err := synth.Build(sh, opts)
			if err != nil {
				return err
			}
			if err := w.WriteFile(out); err != nil {
				return err
			}
			st, _ := os.Stat(out)
			fmt.Fprintf(c.ErrOrStderr(), "wrote %s: %s parameters, %s, %s in %.1fs\n", out,
				humanCount(uint64(sh.Params())), t, humanBytes(uint64(st.Size())), time.Since(start).Seconds())
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&shape, "shape", "stories110M", "model shape: a preset or dim=…,layers=…,heads=…,ffn=…")
	fl.StringVar(&typ, "type", "q8_0", "weight type: q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, f16, bf16, f32")
	fl.StringVar(&vocab, "vocab", "", "GGUF whose tokenizer to copy (its size must match the shape's vocab)")
	fl.StringVarP(&out, "output", "o", "", "output GGUF file")
	fl.Uint64Var(&seed, "seed", 1, "random seed")
	return c
}

// fitsInMemory refuses a shape whose model, which synth holds whole
// before writing it, would not fit in the memory available.
func fitsInMemory(sh synth.Shape, t quant.Type) error {
	n, ok := sh.Bytes(t)
	info, err := sysmem.Read()
	if !ok || err == nil && n > info.Available {
		return &synth.TooLargeError{Shape: sh, Type: t, Bytes: n, Available: info.Available}
	}
	return nil
}
