package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"dovetail/app/runner/pull"
)

func newRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME...",
		Short: "Delete models and EAGLE drafts 'dovetail pull' fetched (never another program's, nor a file Dovetail did not download)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := pull.Dir()
			if err != nil {
				return err
			}
			// Every name is resolved before any is deleted: one refused
			// deletes none.
			var names []string
			for _, name := range args {
				m, err := findPulled(dir, name)
				if err != nil {
					return err
				}
				names = append(names, m)
			}
			for _, name := range names {
				if err := pull.Remove(dir, name); err != nil {
					return fmt.Errorf("rm: %w", err)
				}
				fmt.Fprintf(c.OutOrStdout(), "deleted '%s'\n", name)
			}
			return nil
		},
	}
}

// findPulled is the name of a model pulled into dir. Anything else a name or
// path finds (ollama's or LM Studio's model, a file, the embedded one) is
// refused in one line saying whose it is: Dovetail deletes only what it
// downloaded.
func findPulled(dir, name string) (string, error) {
	if _, err := os.Stat(name); err == nil {
		return pulledFile(dir, name)
	}
	m, ok, err := pull.Find(dir, name)
	if err != nil {
		return "", fmt.Errorf("rm: %w", err)
	}
	if ok {
		return m.Name, nil
	}
	if d, ok, err := pull.FindDraft(dir, name); err == nil && ok {
		return d.Name, nil
	}
	if e, err := findModel(name, ""); err == nil {
		switch e.Source {
		case "embedded":
			return "", fmt.Errorf("rm: %s is the embedded model, part of Dovetail itself: it cannot be deleted", name)
		case "ollama":
			return "", fmt.Errorf("rm: %s is ollama's model (%s): Dovetail did not download it and will not delete it ('ollama rm %s' does)", name, e.Path, e.Name)
		case "lmstudio":
			return "", fmt.Errorf("rm: %s is LM Studio's model (%s): Dovetail did not download it and will not delete it", name, e.Path)
		}
		return "", fmt.Errorf("rm: %s is the file %s, which Dovetail did not download: it will not delete it", name, e.Path)
	}
	return "", fmt.Errorf("rm: no pulled model %q (dovetail list shows them)", name)
}

// pulledFile is the pulled model whose file path is; any other file,
// inside the models folder or not, is refused.
func pulledFile(dir, path string) (string, error) {
	ms, err := pull.List(dir)
	if err != nil {
		return "", fmt.Errorf("rm: %w", err)
	}
	for _, m := range ms {
		if sameFile(m.Path, path) {
			return m.Name, nil
		}
	}
	return "", fmt.Errorf("rm: %s is a file Dovetail did not download: it will not delete it", path)
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
