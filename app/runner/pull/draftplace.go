package pull

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"dovetail/models/eagle"
)

// pulledFiles are the files of the draft pulled before under this name,
// by name and digest, where they are whole.
func pulledFiles(dir string, r Ref) map[string]string {
	d, ok, _ := FindDraft(dir, draftName(r))
	if !ok {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(d.Dir, draftMarker))
	var rec draftRecord
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return nil
	}
	out := map[string]string{}
	for _, f := range rec.Files {
		out[f.Name+" "+f.Digest] = filepath.Join(d.Dir, f.Name)
	}
	return out
}

// placeDraft puts the files in a hidden folder beside the draft's, checks
// that they read as an EAGLE draft, writes the marker last and renames
// the folder into place, replacing the draft pulled before: a pull
// stopped on the way leaves no folder that is listed.
func placeDraft(dir string, r Ref, parts []repoPart) (Draft, error) {
	name := draftName(r)
	final := filepath.Join(draftsRoot(dir), r.Namespace, r.Model)
	if old, ok, _ := FindDraft(dir, name); ok {
		final = old.Dir // the same repository pulled under another case
	}
	stage := filepath.Join(filepath.Dir(final), "."+filepath.Base(final)+".pulling")
	os.RemoveAll(stage)
	defer os.RemoveAll(stage)
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return Draft{}, fmt.Errorf("%s: %w", name, err)
	}
	rec := draftRecord{Name: name}
	var blobs []layer
	for _, p := range parts {
		if err := stageFile(dir, stage, p); err != nil {
			return Draft{}, fmt.Errorf("%s: %w", name, err)
		}
		if p.data == nil && p.have == "" {
			blobs = append(blobs, p.rf.layer())
		}
		rec.Files = append(rec.Files, draftFile{Name: p.name, Size: p.rf.size, Digest: p.digest()})
	}
	defer prune(dir, manifest{Layers: blobs}) // linked into the draft: the copies in blobs/ go
	c, err := eagle.ReadConfig(stage)
	if err != nil {
		return Draft{}, fmt.Errorf("%s: not an EAGLE draft Dovetail reads (%v)", name, err)
	}
	rec.Kind = c.Kind.String()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return Draft{}, err
	}
	if err := writeAtomic(filepath.Join(stage, draftMarker), b); err != nil {
		return Draft{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := replaceDir(stage, final); err != nil {
		return Draft{}, fmt.Errorf("%s: %w", name, err)
	}
	d, ok := readDraft(final)
	if !ok {
		return Draft{}, fmt.Errorf("%s: pulled into %s, but it does not read back", name, final)
	}
	return d, nil
}

// stageFile puts one file into the staging folder: a small one written, a
// blob (or the same file of the draft pulled before) linked, moved where
// the file system has no links (a pull that then fails downloads it
// again).
func stageFile(dir, stage string, p repoPart) error {
	path := filepath.Join(stage, p.name)
	if p.data != nil {
		return writeAtomic(path, p.data)
	}
	from := blobPath(dir, p.rf.sha256)
	if p.have != "" {
		from = p.have // the draft it replaces loses it where links fail
	}
	if err := os.Link(from, path); err == nil {
		return nil
	}
	return os.Rename(from, path)
}

// replaceDir renames from into to's place; a folder there is moved aside
// first and removed once the new one is in place.
func replaceDir(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		old := filepath.Join(filepath.Dir(to), "."+filepath.Base(to)+".old")
		os.RemoveAll(old)
		if err := os.Rename(to, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	return os.Rename(from, to)
}
