package pull

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Draft is an EAGLE draft pulled from Hugging Face into the models
// folder: drafts/hf.co/ORG/REPO/ holds its config.json and weights
// (safetensors or pytorch_model.bin) as the repository has them
// (--draft eagle:DIR reads them).
type Draft struct {
	Name string `json:"name"`       // hf.co/ORG/REPO
	Dir  string `json:"dir"`        // the folder --draft eagle: reads
	Size int64  `json:"size_bytes"` // its files together
	Kind string `json:"kind"`       // "eagle" (EAGLE-1/2) or "eagle3"
}

// draftMarker is written into a draft's folder last, before the folder
// is renamed into place: a folder without it (or without a file it
// lists, at its size) is not a whole draft, and is not listed.
const draftMarker = ".dovetail-draft"

// draftRecord is what the marker holds.
type draftRecord struct {
	Name  string      `json:"name"`
	Kind  string      `json:"kind"`
	Files []draftFile `json:"files"`
}

type draftFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // "sha256:…" or "git:…" (git's blob id)
}

// draftsRoot is where pulled drafts are: drafts/hf.co/ORG/REPO.
func draftsRoot(dir string) string { return filepath.Join(dir, "drafts", hfHost) }

// draftName is the name a draft is pulled and listed under.
func draftName(r Ref) string { return hfHost + "/" + r.Namespace + "/" + r.Model }

// maybeDraft reports whether a name may be an EAGLE draft's: a Hugging
// Face repository named without a file or a quantization.
func maybeDraft(r Ref) bool { return r.HF() && r.File == "" && r.Tag == defaultTag }

// Drafts lists the whole EAGLE drafts pulled into dir, by name. A folder
// that is not a Dovetail models folder (or is not there) has none.
func Drafts(dir string) ([]Draft, error) {
	dir, err := resolveDir(dir)
	if err != nil || !ours(dir) {
		return nil, err
	}
	root := draftsRoot(dir)
	orgs, _ := os.ReadDir(root)
	var out []Draft
	for _, org := range orgs {
		if !org.IsDir() || strings.HasPrefix(org.Name(), ".") {
			continue
		}
		repos, _ := os.ReadDir(filepath.Join(root, org.Name()))
		for _, repo := range repos {
			if !repo.IsDir() || strings.HasPrefix(repo.Name(), ".") {
				continue
			}
			if d, ok := readDraft(filepath.Join(root, org.Name(), repo.Name())); ok {
				out = append(out, d)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readDraft is the draft in a folder, if it is whole: its marker names
// it, and every file the marker lists is there at its size.
func readDraft(path string) (Draft, bool) {
	b, err := os.ReadFile(filepath.Join(path, draftMarker))
	if err != nil {
		return Draft{}, false
	}
	var rec draftRecord
	if json.Unmarshal(b, &rec) != nil || rec.Name == "" || len(rec.Files) == 0 {
		return Draft{}, false
	}
	d := Draft{Name: rec.Name, Dir: path, Kind: rec.Kind}
	for _, f := range rec.Files {
		st, err := os.Lstat(filepath.Join(path, f.Name))
		if f.Name != filepath.Base(f.Name) || err != nil || !st.Mode().IsRegular() || st.Size() != f.Size {
			return Draft{}, false
		}
		d.Size += f.Size
	}
	return d, true
}

// FindDraft is the pulled draft a name names (hf.co/ORG/REPO, in any
// spelling Parse reads, in any case). A name that does not parse is an
// error; one not pulled is ok false.
func FindDraft(dir, name string) (Draft, bool, error) {
	r, err := Parse(name)
	if err != nil {
		return Draft{}, false, err
	}
	if !maybeDraft(r) {
		return Draft{}, false, nil
	}
	ds, err := Drafts(dir)
	if err != nil {
		return Draft{}, false, err
	}
	for _, d := range ds {
		if strings.EqualFold(d.Name, draftName(r)) {
			return d, true, nil
		}
	}
	return Draft{}, false, nil
}

// removeDraft deletes a pulled draft's folder, and its organisation's
// when that is left empty.
func removeDraft(dir string, d Draft) error {
	root := draftsRoot(dir)
	rel, err := filepath.Rel(root, d.Dir)
	if err != nil || len(strings.Split(filepath.ToSlash(rel), "/")) != 2 || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s: %s is not a draft's folder in %s", d.Name, d.Dir, root)
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		return fmt.Errorf("%s: %w", d.Name, err)
	}
	os.Remove(filepath.Dir(d.Dir))
	return nil
}
