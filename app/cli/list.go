package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/assets"
)

// listed is one model as `dovetail list` shows it.
type listed struct {
	Name          string `json:"name"`
	Source        string `json:"source"` // pulled, embedded, ollama, lmstudio
	Path          string `json:"path,omitempty"`
	Size          int64  `json:"size_bytes"`
	Parameters    uint64 `json:"parameters"`
	ParameterSize string `json:"parameter_size"`
	Quantization  string `json:"quantization_level"`
	Arch          string `json:"architecture"`
	Error         string `json:"error,omitempty"` // the header does not read
}

func newListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the models: pulled, embedded, ollama's and LM Studio's, with parameters, quantization and size",
		Long: "List every model Dovetail can run by name: those 'dovetail pull' fetched into the models folder\n" +
			"($DOVETAIL_MODELS, or the user's data folder), the embedded one, and those ollama and LM Studio\n" +
			"downloaded. Parameters and quantization come from each GGUF file's header.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ms, err := listModels()
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetEscapeHTML(false)
				return enc.Encode(ms)
			}
			return writeList(c.OutOrStdout(), ms)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the models as a JSON array")
	return c
}

// listModels describes the pulled models, the embedded one, then
// ollama's and LM Studio's.
func listModels() ([]listed, error) {
	home, _ := os.UserHomeDir()
	found, err := discover.Find(discover.UserPlaces(home))
	if err != nil {
		return nil, err
	}
	embedded := discover.Model{Name: assets.DefaultModelName, Source: "embedded", Size: int64(len(assets.DefaultModel))}
	var out []listed
	for _, e := range append([]discover.Model{embedded}, found...) {
		out = append(out, describeListed(e))
	}
	// Pulled first: what the user fetched with Dovetail leads.
	var pulled, rest []listed
	for _, l := range out {
		if l.Source == "pulled" {
			pulled = append(pulled, l)
		} else {
			rest = append(rest, l)
		}
	}
	return append(pulled, rest...), nil
}

func describeListed(e discover.Model) listed {
	l := listed{Name: e.Name, Source: e.Source, Path: e.Path, Size: e.Size}
	d, err := runner.Describe(e.Path)
	if err != nil {
		l.Error = oneLine(err.Error())
		return l
	}
	l.Parameters, l.ParameterSize, l.Quantization, l.Arch = d.Params, runner.ParamSize(d.Params), d.Quantization, d.Arch
	if l.Size == 0 {
		l.Size = d.Size
	}
	return l
}

// sourceNames are the sources as a person reads them.
var sourceNames = map[string]string{"pulled": "pulled", "embedded": "embedded", "ollama": "ollama", "lmstudio": "LM Studio", "file": "file"}

func writeList(w io.Writer, ms []listed) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPARAMETERS\tQUANTIZATION\tSIZE\tFROM")
	for _, m := range ms {
		params, quant := m.ParameterSize, m.Quantization
		if m.Error != "" {
			params, quant = "?", "unreadable"
		}
		size := "-"
		if m.Size > 0 {
			size = humanBytes(uint64(m.Size))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, params, quant, size, sourceNames[m.Source])
	}
	return tw.Flush()
}
