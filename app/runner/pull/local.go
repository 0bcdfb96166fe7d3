package pull

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"dovetail/internal/atomicfile"
)

// entry is a manifest in the models folder, under the name its path
// gives.
type entry struct {
	ref  Ref
	path string
	m    manifest
}

// entries are the folder's manifests. Only what is under manifests/ and
// named as a name is read: a symbolic link is not followed, a file no
// name has is passed over.
func entries(dir string) []entry {
	root := filepath.Join(dir, "manifests")
	var out []entry
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		r, ok := refOf(strings.Split(filepath.ToSlash(rel), "/"))
		if !ok {
			return nil
		}
		if m, err := readManifest(p); err == nil {
			out = append(out, entry{ref: r, path: p, m: m})
		}
		return nil
	})
	return out
}

func readManifest(path string) (manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return manifest{}, err
	}
	defer f.Close()
	var m manifest
	err = json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&m)
	return m, err
}

// findManifest is the manifest a name has in dir, whatever the case it
// was pulled under.
func findManifest(dir string, r Ref) (entry, bool) {
	for _, e := range entries(dir) {
		if sameName(e.ref, r) {
			return e, true
		}
	}
	return entry{}, false
}

// model is what a manifest describes, if its GGUF file is there.
func model(dir string, e entry) (Model, bool) {
	l, ok := e.m.find(modelLayer)
	if !ok || l.hex() == "" {
		return Model{}, false
	}
	path := blobPath(dir, l.hex())
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return Model{}, false
	}
	m := Model{Name: e.ref.String(), Path: path, Size: st.Size(), Digest: l.Digest}
	if mst, err := os.Stat(e.path); err == nil {
		m.Pulled = mst.ModTime()
	}
	if p, ok := e.m.find(paramsLayer); ok && p.hex() != "" {
		if data, err := os.ReadFile(blobPath(dir, p.hex())); err == nil {
			json.Unmarshal(data, &m.Params)
		}
	}
	return m, true
}

// List is every model pulled into dir, by name. A folder that is not a
// Dovetail models folder (or is not there) has none.
func List(dir string) ([]Model, error) {
	dir, err := resolveDir(dir)
	if err != nil || !ours(dir) {
		return nil, err
	}
	var out []Model
	for _, e := range entries(dir) {
		if m, ok := model(dir, e); ok {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Find is the pulled model a name names, by any spelling of it
// ("llama3.2" is "llama3.2:latest" is "registry.ollama.ai/library/
// llama3.2:latest", in any case). A name that does not parse is an error;
// one not pulled is ok false.
func Find(dir, name string) (Model, bool, error) {
	r, err := Parse(name)
	if err != nil {
		return Model{}, false, err
	}
	dir, err = resolveDir(dir)
	if err != nil || !ours(dir) {
		return Model{}, false, err
	}
	e, ok := findManifest(dir, r)
	if !ok {
		return Model{}, false, nil
	}
	m, ok := model(dir, e)
	return m, ok, nil
}

// Remove deletes a pulled model: its manifest, and the blobs no other
// name uses; or a pulled EAGLE draft's folder (hf.co/ORG/REPO). Only a
// name recorded in dir is removed: a path, a name not pulled, or a folder
// that is not Dovetail's is refused.
func Remove(dir, name string) error {
	r, err := Parse(name)
	if err != nil {
		return err
	}
	dir, err = resolveDir(dir)
	if err != nil {
		return err
	}
	e, err := pulled(dir, r)
	if errors.Is(err, ErrNotFound) && ours(dir) {
		if d, ok, _ := FindDraft(dir, name); ok {
			return removeDraft(dir, d)
		}
	}
	if err != nil {
		return err
	}
	if err := os.Remove(e.path); err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	pruneDirs(dir, filepath.Dir(e.path))
	prune(dir, e.m)
	return nil
}

// Copy gives a pulled model a second name, as ollama's /api/copy does: a
// second manifest naming the same blobs, no second copy of the bytes. A
// model dst named before is replaced.
func Copy(dir, src, dst string) error {
	s, err := Parse(src)
	if err != nil {
		return err
	}
	d, err := Parse(dst)
	if err != nil {
		return err
	}
	dir, err = resolveDir(dir)
	if err != nil {
		return err
	}
	e, err := pulled(dir, s)
	if err != nil {
		return err
	}
	if sameName(s, d) {
		return nil
	}
	return writeManifest(dir, d, e.m)
}

// pulled is the manifest of a model pulled into dir, or an error that is
// ErrNotFound.
func pulled(dir string, r Ref) (entry, error) {
	if !ours(dir) {
		return entry{}, fmt.Errorf("%s: %w: %s is not a Dovetail models folder", r, ErrNotFound, dir)
	}
	e, ok := findManifest(dir, r)
	if !ok {
		return entry{}, fmt.Errorf("%s: %w in %s (only models `dovetail pull` fetched are there)", r, ErrNotFound, dir)
	}
	return e, nil
}

// prune removes the blobs of m that no manifest in dir names any more.
func prune(dir string, m manifest) {
	unused := map[string]bool{}
	for _, l := range m.Layers {
		if h := l.hex(); h != "" {
			unused[h] = true
		}
	}
	for _, e := range entries(dir) {
		for _, l := range e.m.Layers {
			delete(unused, l.hex())
		}
	}
	for h := range unused {
		p := blobPath(dir, h)
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
			os.Remove(p)
		}
	}
}

// pruneDirs removes the folders a removed manifest leaves empty, up to
// manifests/.
func pruneDirs(dir, from string) {
	root := filepath.Join(dir, "manifests")
	for p := from; strings.HasPrefix(p, root+string(filepath.Separator)); p = filepath.Dir(p) {
		if os.Remove(p) != nil {
			return
		}
	}
}

func writeAtomic(path string, data []byte) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
