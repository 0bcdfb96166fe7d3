package cli

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/models"
	"dovetail/models/gguf"
	"dovetail/quant"
)

func newShowCmd() *cobra.Command {
	var verbose bool
	c := &cobra.Command{
		Use:   "show [MODEL.gguf|NAME]",
		Short: "Show a model's architecture, size, context, vocabulary and tensor types",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				var err error
				if path, _, err = modelPath(args[0]); err != nil {
					return err
				}
			}
			f, err := runner.OpenGGUF(path)
			if err != nil {
				return err
			}
			defer f.Close()
			return show(c.OutOrStdout(), f, verbose)
		},
	}
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "also list every metadata entry and tensor")
	return c
}

func show(w io.Writer, f *gguf.File, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cfg, cfgErr := models.ConfigFromGGUF(f)
	fmt.Fprintf(tw, "  Model\n")
	arch, _ := f.String("general.architecture")
	row := func(k string, v any) { fmt.Fprintf(tw, "    %s\t%v\n", k, v) }
	row("file", f.Path)
	if name, ok := f.String("general.name"); ok {
		row("name", name)
	}
	row("architecture", arch)
	row("parameters", humanCount(models.Params(f)))
	if cfgErr == nil {
		row("context length", cfg.ContextLength)
		row("embedding length", cfg.Hidden)
		row("layers", cfg.Layers)
		row("attention heads", fmt.Sprintf("%d (%d KV)", cfg.Heads, cfg.KVHeads))
		row("feed-forward length", cfg.FFN)
		row("vocabulary", cfg.Vocab)
		row("rope base", cfg.RopeTheta)
		row("rms norm eps", cfg.RMSEps)
		row("tied output", cfg.TiedOutput)
	} else {
		row("runs", fmt.Sprintf("no: %v", cfgErr))
	}
	if m, ok := f.String("tokenizer.ggml.model"); ok {
		pre, _ := f.String("tokenizer.ggml.pre")
		row("tokenizer", fmt.Sprintf("%s (pre-tokenizer %q)", m, pre))
	}
	if lic, ok := f.String("general.license"); ok {
		row("license", lic)
	}
	fmt.Fprintf(tw, "\n  Tensors\n    type\tcount\tparameters\tbytes\n")
	type agg struct{ n, params, bytes uint64 }
	byType := map[quant.Type]*agg{}
	var total uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		a := byType[t.Type]
		if a == nil {
			a = &agg{}
			byType[t.Type] = a
		}
		a.n++
		a.params += t.Elements()
		a.bytes += t.Size
		total += t.Size
	}
	types := make([]quant.Type, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return byType[types[i]].bytes > byType[types[j]].bytes })
	for _, t := range types {
		a := byType[t]
		fmt.Fprintf(tw, "    %s\t%d\t%s\t%s\n", t, a.n, humanCount(a.params), humanBytes(a.bytes))
	}
	fmt.Fprintf(tw, "    total\t%d\t%s\t%s\n", len(f.Tensors), humanCount(models.Params(f)), humanBytes(total))
	if verbose {
		fmt.Fprintf(tw, "\n  Metadata\n")
		for _, kv := range f.KVs {
			fmt.Fprintf(tw, "    %s\t%s\n", kv.Key, gguf.FormatValue(kv.Value))
		}
		fmt.Fprintf(tw, "\n  Tensor list\n")
		for i := range f.Tensors {
			t := &f.Tensors[i]
			fmt.Fprintf(tw, "    %s\t%s\t%v\t%s\n", t.Name, t.Type, t.Dims, humanBytes(t.Size))
		}
	}
	return tw.Flush()
}

func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
