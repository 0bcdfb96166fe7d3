package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/app/runner/probe"
)

func newProbeCmd() *cobra.Command {
	var asJSON, quick bool
	c := &cobra.Command{
		Use:   "probe [--json]",
		Short: "Say what this machine has for running models, and what is missing",
		Long: "Probe the CPU (model, instruction sets, the kernels that run, cores, caches), the memory\n" +
			"(available, under a container's limit, and its bandwidth at 1..N threads) and each NVIDIA\n" +
			"GPU (compute capability, memory free and its peak bandwidth, PCIe link, copy speeds), and say in words what is\n" +
			"missing and what follows. --json prints one object.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o := probe.Options{Measure: !quick}
			if !asJSON {
				o.Progress = func(s probe.Step) { fmt.Fprintf(c.ErrOrStderr(), "\rmeasuring %-44s", s.What) }
			}
			r := probe.Run(o)
			if !asJSON {
				fmt.Fprintf(c.ErrOrStderr(), "\r%-54s\r", "")
			}
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printProbe(c.OutOrStdout(), r)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	c.Flags().BoolVar(&quick, "quick", false, "read what the machine says without measuring bandwidth")
	return c
}

func printProbe(w io.Writer, r probe.Report) {
	c := r.CPU
	fmt.Fprintf(w, "CPU     %s (%s), %d cores, %d threads\n", c.Model, c.Vendor, c.Cores, c.Threads)
	fmt.Fprintf(w, "        %s\n", strings.Join(c.ISA, " "))
	fmt.Fprintf(w, "        kernels: %s; caches L1d %s, L2 %s, L3 %s\n", c.Kernels, runner.HumanBytes(uint64(max(c.L1D, 0))),
		runner.HumanBytes(uint64(max(c.L2, 0))), runner.HumanBytes(uint64(max(c.L3, 0))))
	m := r.Memory
	limited := ""
	if m.Limited {
		limited = " (a container's limit)"
	}
	fmt.Fprintf(w, "memory  %s%s, %s available\n", runner.HumanBytes(m.TotalBytes), limited, runner.HumanBytes(m.AvailableBytes))
	if len(m.ByThreads) > 0 {
		var bw []string
		for i, v := range m.ByThreads {
			bw = append(bw, fmt.Sprintf("%d: %.1f", i+1, v))
		}
		fmt.Fprintf(w, "        bandwidth GB/s by threads  %s\n", strings.Join(bw, "  "))
	}
	for _, g := range r.GPUs {
		fmt.Fprintf(w, "GPU     %s, compute %s, %s free of %s, PCIe gen %d x%d (at most gen %d x%d) at %s\n", g.Name,
			g.ComputeCapability, runner.HumanBytes(g.VRAMFreeBytes), runner.HumanBytes(g.VRAMTotalBytes), g.PCIeGen, g.PCIeWidth,
			g.PCIeMaxGen, g.PCIeMaxWidth, g.PCIBusID)
		if g.MemoryBandwidthGBs > 0 {
			fmt.Fprintf(w, "        memory %.0f GB/s at its peak (%d MHz, %d bits)\n", g.MemoryBandwidthGBs, g.MemoryClockKHz/1000, g.MemoryBusBits)
		}
		if g.H2DGBs > 0 {
			fmt.Fprintf(w, "        copies %.1f GB/s to the GPU, %.1f GB/s back, %.0f µs a small one\n", g.H2DGBs, g.D2HGBs, g.LatencyUs)
		}
	}
	if len(r.GPUs) == 0 {
		fmt.Fprintln(w, "GPU     none")
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "note    %s\n", f)
	}
}
