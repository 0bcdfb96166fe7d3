package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"dovetail/app/runner/store"
)

func newDraftsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "drafts",
		Short: "List the drafts saved for your models (distilled or adapted online) and the EAGLE drafts pulled",
		Long: "List the DGF drafts kept in <user config dir>/dovetail/drafts, one per target model:\n" +
			"the target, file size, adapted version, τ (tokens per round) measured each time\n" +
			"adaptation swapped in a better draft, and the size of the text memory saved beside it\n" +
			"(the verified text whose continuations drafts propose); and files set aside because they did\n" +
			"not load (NAME.corrupt). `dovetail drafts rm` deletes them all;\n" +
			"`dovetail drafts restore` brings back the draft an install replaced.\n" +
			"Then the EAGLE drafts `dovetail pull hf.co/ORG/REPO` fetched into the models folder: name,\n" +
			"kind, size, and the targets they fit (hidden size, vocabulary, and what they read: EAGLE-3\n" +
			"three target layers, EAGLE-1 the final hidden state); `dovetail rm NAME` deletes one.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return listDrafts(c) },
	}
	c.AddCommand(&cobra.Command{
		Use:   "rm TARGET|FINGERPRINT...",
		Short: "Delete saved drafts and their text memories, by target file name or whole fingerprint",
		Long: "Delete a saved draft, its text memory and the draft an install replaced. A name removes\n" +
			"only what it names unambiguously: a whole fingerprint, or a target file name exactly one\n" +
			"entry has; otherwise the candidates are listed and nothing is removed.",
		Args: cobra.MinimumNArgs(1),
		RunE: removeDrafts,
	}, &cobra.Command{
		Use:   "restore TARGET|FINGERPRINT",
		Short: "Bring back the draft an install replaced (run again to undo)",
		Args:  cobra.ExactArgs(1),
		RunE:  restoreDraft,
	})
	return c
}

// listDrafts is `dovetail drafts`: a table of the saved drafts, then one
// of the EAGLE drafts pulled.
func listDrafts(c *cobra.Command) error {
	if err := listSavedDrafts(c); err != nil {
		return err
	}
	fmt.Fprintln(c.OutOrStdout())
	return listEagleDrafts(c.OutOrStdout())
}

// listSavedDrafts is the table of the DGF drafts saved for targets.
func listSavedDrafts(c *cobra.Command) error {
	st, err := store.Open()
	if err != nil {
		return err
	}
	ds, err := st.Drafts()
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		fmt.Fprintf(c.OutOrStdout(), "no saved drafts in %s\n", st.DraftsDir())
		return nil
	}
	w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TARGET\tFINGERPRINT\tSIZE\tVERSION\tτ HISTORY\tMEMORY\tSAVED")
	// Why a file does not load goes below the table, a line each: in a
	// column it would stretch every row.
	var notes []string
	for _, d := range ds {
		if d.Err != nil {
			what := "(unreadable)"
			if d.Aside {
				what = "(set aside: " + strings.TrimPrefix(filepath.Base(d.Path), d.Fingerprint) + ")"
			} else {
				notes = append(notes, fmt.Sprintf("(unreadable) %s: %v", filepath.Base(d.Path), d.Err))
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t-\t-\t-\t-\n", what, d.Fingerprint, humanBytes(uint64(max(d.Size, d.Memory))))
			continue
		}
		size, memory := "-", "-"
		if d.Size > 0 {
			size = humanBytes(uint64(d.Size))
		}
		if d.Memory > 0 {
			memory = humanBytes(uint64(d.Memory))
		}
		version := orDash(d.Version)
		if d.Prev {
			version += " (+prev)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Target, d.Fingerprint, size, version,
			orDash(tauHistory(d.TauHistory)), memory, orDash(d.SavedAt))
	}
	w.Flush()
	for _, n := range notes {
		fmt.Fprintln(c.OutOrStdout(), n)
	}
	if slices.ContainsFunc(ds, func(d store.Saved) bool { return d.Aside }) {
		fmt.Fprintln(c.OutOrStdout(), "(set aside): files that did not load, kept for you to inspect; `dovetail drafts rm FINGERPRINT` deletes them with the rest")
	}
	fmt.Fprintf(c.OutOrStdout(), "in %s\n", st.DraftsDir())
	return nil
}

// removeDrafts is `dovetail drafts rm`: every name is resolved before
// anything is removed.
func removeDrafts(c *cobra.Command, args []string) error {
	st, err := store.Open()
	if err != nil {
		return err
	}
	var found []store.Saved
	for _, a := range args {
		d, err := st.Find(a)
		if err != nil {
			return fmt.Errorf("drafts rm: %w", err)
		}
		found = append(found, d)
	}
	for _, d := range found {
		removed, err := st.Remove(d)
		for _, p := range removed {
			fmt.Fprintf(c.OutOrStdout(), "removed %s (%s)\n", p, orDash(d.Target))
		}
		if err != nil {
			return fmt.Errorf("drafts rm: %w", err)
		}
	}
	return nil
}

// restoreDraft is `dovetail drafts restore`.
func restoreDraft(c *cobra.Command, args []string) error {
	st, err := store.Open()
	if err != nil {
		return err
	}
	d, err := st.Find(args[0])
	if err != nil {
		return fmt.Errorf("drafts restore: %w", err)
	}
	if err := st.Restore(d.Fingerprint); err != nil {
		return fmt.Errorf("drafts restore: %w", err)
	}
	fmt.Fprintf(c.OutOrStdout(), "restored the earlier draft of %s; the one it replaced is kept (run again to undo)\n", orDash(d.Target))
	return nil
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
		return store.FormatFloats(h[:2]) + ",…," + store.FormatFloats(h[len(h)-3:])
	}
	return store.FormatFloats(h)
}
