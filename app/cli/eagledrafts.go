package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"dovetail/app/runner"
	"dovetail/app/runner/pull"
	"dovetail/models/draft"
	"dovetail/models/eagle"
)

// eagleShape is what a pulled EAGLE draft fits, from its config.json and
// fc tensor: the kind in words, hidden size, vocabulary, and what of the
// target it reads.
type eagleShape struct {
	kind          string // "EAGLE-3", "EAGLE-1"
	hidden, vocab int
	reads         string
}

func readEagleShape(dir string) (eagleShape, error) {
	c, err := eagle.ReadConfig(dir)
	if err != nil {
		return eagleShape{}, err
	}
	s := eagleShape{kind: "EAGLE-1", hidden: c.Hidden, vocab: c.Vocab, reads: "final hidden state"}
	if c.Kind == draft.EAGLE3 {
		s.kind, s.reads = "EAGLE-3", "target layers 2, L/2, L-3"
		if c.AuxSet {
			s.reads = fmt.Sprintf("target layers %d, %d, %d", c.Aux[0], c.Aux[1], c.Aux[2])
		}
	}
	return s, nil
}

// pulledDraftLine is what `pull` says of a draft it pulled.
func pulledDraftLine(m pull.Model) string {
	s, err := readEagleShape(m.Path)
	if err != nil {
		return fmt.Sprintf("pulled EAGLE draft %s (%s) into %s, but it does not read: %v", m.Name, runner.HumanBytes(uint64(m.Size)), m.Path, err)
	}
	return fmt.Sprintf("pulled %s draft %s (%s) into %s; it drafts for targets of hidden size %d and vocabulary %d (--draft eagle:%s)",
		s.kind, m.Name, runner.HumanBytes(uint64(m.Size)), m.Path, s.hidden, s.vocab, m.Path)
}

// listEagleDrafts is `drafts`' second table: the EAGLE drafts pulled into
// the models folder, and the shape each fits.
func listEagleDrafts(out io.Writer) error {
	dir, err := pull.Dir()
	if err != nil {
		return err
	}
	ds, err := pull.Drafts(dir)
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		fmt.Fprintln(out, "no pulled EAGLE drafts (`dovetail pull hf.co/ORG/REPO` of an EAGLE repository gets one)")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "EAGLE DRAFT\tKIND\tSIZE\tHIDDEN\tVOCABULARY\tREADS")
	var notes []string
	for _, d := range ds {
		s, err := readEagleShape(d.Dir)
		if err != nil {
			fmt.Fprintf(w, "%s\t(unreadable)\t%s\t-\t-\t-\n", d.Name, runner.HumanBytes(uint64(d.Size)))
			notes = append(notes, fmt.Sprintf("(unreadable) %s: %v", d.Name, err))
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", d.Name, s.kind, runner.HumanBytes(uint64(d.Size)), s.hidden, s.vocab, s.reads)
	}
	w.Flush()
	for _, n := range notes {
		fmt.Fprintln(out, n)
	}
	fmt.Fprintf(out, "in %s (--draft eagle:FOLDER runs one; `dovetail rm NAME` deletes one)\n", pullDraftsDir(dir))
	return nil
}

func pullDraftsDir(dir string) string { return filepath.Join(dir, "drafts", "hf.co") }
