package store

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"dovetail/engine/adapt"
	"dovetail/models/draft"
)

// Metadata an adapted draft carries in its checkpoint.
const (
	MetaVersion    = "dovetail.adapt.version"
	MetaTauHistory = "dovetail.adapt.tau_history"
	MetaSavedAt    = "dovetail.adapt.saved_at"
	MetaStartedAs  = "dovetail.adapt.started_as"
)

// Saved is one target's entry in the drafts directory: its draft, its text
// memory, or both.
type Saved struct {
	Fingerprint string
	Target      string // the target's file name, as the draft or memory records it
	Path        string // the draft (or, for a memory saved alone, the memory)
	Size        int64  // of the draft, 0 without one
	Memory      int64  // bytes of the text memory beside it (0: none)
	Prev        bool   // an installed draft replaced an earlier one, kept restorable
	Version     string
	TauHistory  []float64
	SavedAt     string
	StartedAs   string
	Err         error // the draft (or memory) does not load
	// Aside marks a file set aside as unreadable (SetAside): kept for
	// the user, never loaded, removed with the rest by Remove.
	Aside bool
}

// Drafts lists every saved draft and text memory, unreadable ones
// included, by path.
func (s *Store) Drafts() ([]Saved, error) {
	dir := s.DraftsDir()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Saved
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if fp, ok := asideOf(name); ok {
			out = append(out, setAside(filepath.Join(dir, name), fp, e))
		} else if strings.HasSuffix(name, ".gguf") {
			out = append(out, s.readDraft(filepath.Join(dir, name), e))
		}
	}
	// A text memory is saved even while the draft itself is not (no better
	// version yet): it is listed on its own.
	for _, e := range ents {
		fp, ok := strings.CutSuffix(e.Name(), ".memory")
		if e.IsDir() || !ok {
			continue
		}
		if _, err := os.Stat(s.DraftPath(fp)); err == nil {
			continue
		}
		out = append(out, readMemory(filepath.Join(dir, e.Name()), fp))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// asideOf is the fingerprint of a draft or text memory SetAside moved to
// name (FP.gguf.corrupt, FP.memory.corrupt.2, …).
func asideOf(name string) (string, bool) {
	base, n, ok := strings.Cut(name, ".corrupt")
	if !ok || n != "" && (n[0] != '.' || strings.Trim(n[1:], "0123456789") != "" || len(n) == 1) {
		return "", false
	}
	for _, ext := range []string{".gguf", ".memory"} {
		if fp, ok := strings.CutSuffix(base, ext); ok {
			return fp, true
		}
	}
	return "", false
}

// setAside is the entry of a file set aside as unreadable.
func setAside(path, fp string, e fs.DirEntry) Saved {
	d := Saved{Path: path, Fingerprint: fp, Aside: true, Err: errors.New("set aside as unreadable")}
	if st, err := e.Info(); err == nil {
		d.Size = st.Size()
	}
	return d
}

func (s *Store) readDraft(path string, e fs.DirEntry) Saved {
	d := Saved{Path: path, Fingerprint: strings.TrimSuffix(filepath.Base(path), ".gguf")}
	if st, err := e.Info(); err == nil {
		d.Size = st.Size()
	}
	if st, err := os.Stat(s.MemoryPath(d.Fingerprint)); err == nil {
		d.Memory = st.Size()
	}
	if _, err := os.Stat(s.PrevPath(d.Fingerprint)); err == nil {
		d.Prev = true
	}
	ck, err := draft.Check(path)
	if err != nil {
		d.Err = err
		return d
	}
	d.Fingerprint, d.Target = ck.Fingerprint, ck.TargetName
	d.Version, d.SavedAt, d.StartedAs = ck.Meta[MetaVersion], ck.Meta[MetaSavedAt], ck.Meta[MetaStartedAs]
	d.TauHistory = ParseFloats(ck.Meta[MetaTauHistory])
	return d
}

func readMemory(path, fp string) Saved {
	d := Saved{Path: path, Fingerprint: fp}
	data, err := os.ReadFile(path)
	if err == nil {
		d.Memory = int64(len(data))
		d.Target, _, err = adapt.ParseMemory(data, math.MaxInt32)
	}
	d.Err = err
	return d
}

// AmbiguousError says a name matched no entry or more than one.
type AmbiguousError struct {
	Name       string
	Candidates []Saved
}

func (e *AmbiguousError) Error() string {
	if len(e.Candidates) == 0 {
		return fmt.Sprintf("no saved draft for %q (see `dovetail drafts`)", e.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%q matches %d saved drafts; name one by its whole fingerprint:", e.Name, len(e.Candidates))
	for _, c := range e.Candidates {
		fmt.Fprintf(&b, "\n  %s  %s", c.Fingerprint, orDash(c.Target))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Find is the one entry name means: a whole fingerprint, or a target file
// name (the base name of a path is enough) that exactly one entry has.
// Anything else — no entry, several, or only the start of a fingerprint —
// is an *AmbiguousError listing the candidates.
func (s *Store) Find(name string) (Saved, error) {
	ds, err := s.Drafts()
	if err != nil {
		return Saved{}, err
	}
	var byTarget, candidates []Saved
	for _, d := range ds {
		if name != "" && d.Fingerprint == name {
			return d, nil
		}
		if name != "" && d.Target != "" && (d.Target == name || filepath.Base(d.Target) == filepath.Base(name)) {
			byTarget = append(byTarget, d)
		}
		if name != "" && strings.HasPrefix(d.Fingerprint, name) {
			candidates = append(candidates, d)
		}
	}
	if len(byTarget) == 1 {
		return byTarget[0], nil
	}
	return Saved{}, &AmbiguousError{Name: name, Candidates: append(byTarget, candidates...)}
}

// Remove deletes an entry's files: the draft, its text memory, the
// draft an install replaced, and those of them set aside as unreadable.
// It returns the paths removed.
func (s *Store) Remove(d Saved) ([]string, error) {
	var removed []string
	paths := []string{d.Path, s.MemoryPath(d.Fingerprint), s.PrevPath(d.Fingerprint)}
	for i := 1; i <= maxAside; i++ {
		paths = append(paths, AsidePath(s.DraftPath(d.Fingerprint), i), AsidePath(s.MemoryPath(d.Fingerprint), i))
	}
	for _, p := range paths {
		err := os.Remove(p)
		if err == nil {
			removed = append(removed, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
	}
	return removed, nil
}

// Install saves ck as its target's draft, where `--draft auto` finds it.
// A draft already there is kept as PrevPath, restorable with Restore; an
// earlier one kept there gives way to it.
func (s *Store) Install(ck *draft.Checkpoint) (path string, replaced bool, err error) {
	path = s.DraftPath(ck.Fingerprint)
	if err := s.MakeDir(s.DraftsDir(), true); err != nil {
		return "", false, err
	}
	if _, err := os.Stat(path); err == nil {
		if err := os.Rename(path, s.PrevPath(ck.Fingerprint)); err != nil {
			return "", false, fmt.Errorf("keeping the installed draft as %s: %w", s.PrevPath(ck.Fingerprint), err)
		}
		replaced = true
	}
	if err := ck.WriteFile(path); err != nil {
		if replaced {
			os.Rename(s.PrevPath(ck.Fingerprint), path)
		}
		return "", false, err
	}
	return path, replaced, nil
}

// Restore makes the draft an install replaced the target's draft again;
// the draft it replaces becomes the one kept, so a second Restore undoes
// the first.
func (s *Store) Restore(fp string) error {
	cur, prev := s.DraftPath(fp), s.PrevPath(fp)
	if _, err := os.Stat(prev); err != nil {
		return fmt.Errorf("no earlier draft kept for %s", fp)
	}
	tmp := cur + ".restoring"
	if err := os.Rename(prev, tmp); err != nil {
		return err
	}
	if err := os.Rename(cur, prev); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.Rename(tmp, prev)
		return err
	}
	return os.Rename(tmp, cur)
}

// Shelve keeps the target's installed draft as the previous one, so that
// the draft it started from (the shipped one, found when none is
// installed) drafts again; Restore undoes it.
func (s *Store) Shelve(fp string) error {
	if err := os.Rename(s.DraftPath(fp), s.PrevPath(fp)); err != nil {
		return fmt.Errorf("setting the adapted draft back: %w", err)
	}
	return nil
}

// FormatFloats writes a τ history as draft metadata.
func FormatFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(s, ",")
}

// ParseFloats reads a τ history from draft metadata.
func ParseFloats(s string) []float64 {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if x, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err == nil {
			out = append(out, x)
		}
	}
	return out
}
