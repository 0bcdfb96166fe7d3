package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"dovetail/internal/memload"
)

func newBenchLoadCmd() *cobra.Command {
	var rate float64
	var sizeMiB int
	var seconds float64
	c := &cobra.Command{
		Use:   "load [--rate GB/s] [--size MiB] [--for SECONDS]",
		Short: "Read memory at a fixed rate beside a measurement: a slow memory hour made on purpose",
		Long: "Stream a buffer larger than the caches (--size, 1024 MiB) at --rate GB/s (0: as fast as one\n" +
			"core reads) until Ctrl-C or --for seconds, printing the rate each second on stderr. Run it\n" +
			"beside `dovetail bench` and a peer's llama-bench, so that both read the memory that is left\n" +
			"(docs/measurements/kernels.md: a slow hour, and a desktop with a browser beside the model).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := interruptible()
			defer stop()
			if seconds > 0 {
				var cancel func()
				ctx, cancel = context.WithTimeout(ctx, time.Duration(seconds*float64(time.Second)))
				defer cancel()
			}
			st, err := memload.Run(ctx, sizeMiB<<20, rate*1e9, func(s memload.Stats) {
				fmt.Fprintf(c.ErrOrStderr(), "read %.2f GB/s\n", s.Rate()/1e9)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "read %.1f GB in %.1f s: %.2f GB/s\n", float64(st.Bytes)/1e9, st.Elapsed.Seconds(), st.Rate()/1e9)
			return nil
		},
	}
	fl := c.Flags()
	fl.Float64Var(&rate, "rate", 0, "GB/s to read (0: as fast as one core reads)")
	fl.IntVar(&sizeMiB, "size", 1024, "MiB of buffer (larger than the last-level cache)")
	fl.Float64Var(&seconds, "for", 0, "seconds to run (0: until Ctrl-C)")
	return c
}
