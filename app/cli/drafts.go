package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"dovetail/engine"
	"dovetail/models/draft"
)

// savedDraftInfo is one file of the drafts directory.
type savedDraftInfo struct {
	Path, Fingerprint, Target string
	Size                      int64
	Version                   string
	TauHistory                []float64
	SavedAt, StartedAs        string
	Memory                    int64 // bytes of the text memory saved beside it (0: none)
	Err                       error // the file does not load
}

// draftsDir is where saved drafts live (see draft.DefaultPath).
func draftsDir() (string, error) {
	p, err := draft.DefaultPath("x")
	if err != nil {
		return "", fmt.Errorf("no user config directory: %w", err)
	}
	return filepath.Dir(p), nil
}

// listDrafts reads every saved draft, unreadable ones included.
func listDrafts() ([]savedDraftInfo, error) {
	dir, err := draftsDir()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []savedDraftInfo
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".gguf") || strings.HasSuffix(name, ".gguf.corrupt")) {
			continue
		}
		path := filepath.Join(dir, name)
		info := savedDraftInfo{Path: path, Fingerprint: strings.TrimSuffix(strings.TrimSuffix(name, ".corrupt"), ".gguf")}
		if st, err := e.Info(); err == nil {
			info.Size = st.Size()
		}
		if st, err := os.Stat(memoryPath(path)); err == nil && !strings.HasSuffix(name, ".corrupt") {
			info.Memory = st.Size()
		}
		ck, err := draft.Load(path)
		if err == nil && strings.HasSuffix(name, ".corrupt") {
			err = errors.New("set aside as unreadable")
		}
		if err != nil {
			info.Err = err
		} else {
			info.Fingerprint, info.Target = ck.Fingerprint, ck.TargetName
			info.Version, info.SavedAt, info.StartedAs = ck.Meta[metaVersion], ck.Meta[metaSavedAt], ck.Meta[metaStartedAs]
			info.TauHistory = parseFloats(ck.Meta[metaTauHistory])
		}
		out = append(out, info)
	}
	// A text memory is saved even while the draft itself is not (no better
	// version yet): list it on its own.
	for _, e := range ents {
		name := e.Name()
		fp, ok := strings.CutSuffix(name, ".memory")
		if e.IsDir() || !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, fp+".gguf")); err == nil {
			continue
		}
		path := filepath.Join(dir, name)
		info := savedDraftInfo{Path: path, Fingerprint: fp}
		data, err := os.ReadFile(path)
		if err == nil {
			info.Memory = int64(len(data))
			info.Target, _, err = engine.ParseMemory(data, math.MaxInt32)
		}
		info.Err = err
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func newDraftsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "drafts",
		Short: "List the drafts saved for your models (distilled or adapted online)",
		Long: "List the DGF drafts kept in <user config dir>/dovetail/drafts, one per target model:\n" +
			"the target, file size, adapted version, τ (tokens per round) measured each time\n" +
			"adaptation swapped in a better draft, and the size of the text memory saved beside it\n" +
			"(the verified text whose continuations drafts propose). `dovetail drafts rm` deletes both.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ds, err := listDrafts()
			if err != nil {
				return err
			}
			dir, _ := draftsDir()
			if len(ds) == 0 {
				fmt.Fprintf(c.OutOrStdout(), "no saved drafts in %s\n", dir)
				return nil
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TARGET\tFINGERPRINT\tSIZE\tVERSION\tτ HISTORY\tMEMORY\tSAVED")
			for _, d := range ds {
				if d.Err != nil {
					fmt.Fprintf(w, "(unreadable)\t%s\t%s\t-\t%v\t-\t-\n", d.Fingerprint, humanBytes(uint64(max(d.Size, d.Memory))), d.Err)
					continue
				}
				size, memory := "-", "-"
				if d.Size > 0 {
					size = humanBytes(uint64(d.Size))
				}
				if d.Memory > 0 {
					memory = humanBytes(uint64(d.Memory))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Target, d.Fingerprint, size, orDash(d.Version),
					orDash(tauHistory(d.TauHistory)), memory, orDash(d.SavedAt))
			}
			w.Flush()
			fmt.Fprintf(c.OutOrStdout(), "in %s\n", dir)
			return nil
		},
	}
	c.AddCommand(&cobra.Command{
		Use:   "rm TARGET|FINGERPRINT...",
		Short: "Delete saved drafts, by target name or fingerprint (or its first characters)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ds, err := listDrafts()
			if err != nil {
				return err
			}
			for _, a := range args {
				n := 0
				for _, d := range ds {
					if a == "" || !(d.Target == a || filepath.Base(d.Target) == a || strings.HasPrefix(d.Fingerprint, a)) {
						continue
					}
					for _, p := range []string{d.Path, memoryPath(d.Path)} {
						if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
							return err
						}
					}
					fmt.Fprintf(c.OutOrStdout(), "removed %s (%s)\n", d.Path, orDash(d.Target))
					n++
				}
				if n == 0 {
					return fmt.Errorf("drafts rm: no saved draft for %q (see `dovetail drafts`)", a)
				}
			}
			return nil
		},
	})
	return c
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tauHistory shows the first and the last few values.
func tauHistory(h []float64) string {
	if len(h) > 6 {
		return formatFloats(h[:2]) + ",…," + formatFloats(h[len(h)-3:])
	}
	return formatFloats(h)
}
