package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Pull gets the model a name names into the models folder and returns
// it: the manifest (or, for a Hugging Face file, what its HEAD says),
// then its GGUF layer and its params, each verified before it is kept,
// then the manifest under the name. A Hugging Face repository named alone
// (hf.co/ORG/REPO) whose config.json describes an EAGLE draft is pulled
// as one (Model.Draft). What a pull stopped by ctx had downloaded is kept
// (an *Interrupted says where) for the next to resume.
func Pull(ctx context.Context, name string, o Options) (Model, error) {
	r, err := Parse(name)
	if err != nil {
		return Model{}, err
	}
	o = withDefaults(o)
	dir, err := resolveDir(o.Dir)
	if err != nil {
		return Model{}, err
	}
	if err := claim(dir); err != nil {
		return Model{}, err
	}
	baseURL := base(r, o)
	var token string
	if tok := o.Env("HF_TOKEN"); r.HF() && tok != "" {
		token = "Bearer " + tok
	}
	f := newFetcher(o.Client, r.String(), baseURL, r.HF(), token)
	o.Progress(Progress{Status: "pulling manifest"})
	if !maybeDraft(r) {
		return pullModel(ctx, f, baseURL, dir, r, o)
	}
	m, notDraft, err := pullDraft(ctx, f, baseURL, dir, r, o)
	if err != nil {
		return Model{}, err
	}
	if m.Draft != nil {
		o.Progress(Progress{Status: "success"})
		return m, nil
	}
	m, err = pullModel(ctx, f, baseURL, dir, r, o)
	var se *StatusError
	if errors.As(err, &se) && se.Code >= 400 && se.Code < 500 && notDraft != "" {
		return Model{}, fmt.Errorf("%s is neither a GGUF repository nor an EAGLE draft (%s): name a GGUF file of a repository that has one "+
			"(hf.co/ORG/REPO/FILE.gguf or hf.co/ORG/REPO:QUANT); Hugging Face answered: %w", draftName(r), notDraft, err)
	}
	return m, err
}

// pullModel pulls a GGUF model: its manifest, its layers, the manifest
// written under the name.
func pullModel(ctx context.Context, f *fetcher, baseURL, dir string, r Ref, o Options) (Model, error) {
	m, blobURL, err := resolve(ctx, f, baseURL, r)
	if err != nil {
		return Model{}, err
	}
	keep, err := layersToKeep(r, m)
	if err != nil {
		return Model{}, err
	}
	if err := checkSpace(dir, r, keep); err != nil {
		return Model{}, err
	}
	for _, l := range keep {
		if err := fetchBlob(ctx, f, dir, l, blobURL(l), o.Progress); err != nil {
			return Model{}, err
		}
	}
	o.Progress(Progress{Status: "writing manifest"})
	if err := writeManifest(dir, r, manifest{SchemaVersion: 2, MediaType: manifestType, Layers: keep}); err != nil {
		return Model{}, err
	}
	got, ok, err := Find(dir, r.String())
	if err != nil || !ok {
		return Model{}, fmt.Errorf("%s: pulled, but it does not read back: %v", r, err)
	}
	o.Progress(Progress{Status: "success"})
	return got, nil
}

func withDefaults(o Options) Options {
	if o.Client == nil {
		o.Client = defaultClient()
	}
	if o.Env == nil {
		o.Env = os.Getenv
	}
	if o.Progress == nil {
		o.Progress = func(Progress) {}
	}
	return o
}

// resolve is a name's manifest and where each of its blobs is.
func resolve(ctx context.Context, f *fetcher, baseURL string, r Ref) (manifest, func(layer) string, error) {
	if r.File != "" {
		u := fileURL(baseURL, r)
		m, err := f.fileManifest(ctx, u)
		return m, func(layer) string { return u }, err
	}
	m, err := f.getManifest(ctx, baseURL, r)
	return m, func(l layer) string { return baseURL + repoPath(r) + "/blobs/" + l.Digest }, err
}

// layersToKeep are what of a manifest Dovetail uses: the GGUF file, and
// the params (stop words, temperature…) that become the model's
// defaults. The chat template comes from the GGUF file itself.
func layersToKeep(r Ref, m manifest) ([]layer, error) {
	model, ok := m.find(modelLayer)
	if !ok {
		return nil, fmt.Errorf("%s: the manifest has no GGUF layer (%s): not a model Dovetail runs", r, modelLayer)
	}
	keep := []layer{model}
	if p, ok := m.find(paramsLayer); ok {
		keep = append(keep, p)
	}
	for _, l := range keep {
		if l.hex() == "" || l.Size <= 0 {
			return nil, fmt.Errorf("%s: the manifest's layer %q has no usable digest and size", r, l.Digest)
		}
	}
	return keep, nil
}

// checkSpace refuses a pull the disk has no room for, before it begins:
// the bytes still missing (less any partial file's) against the space free.
func checkSpace(dir string, r Ref, ls []layer) error {
	var need int64
	for _, l := range ls {
		final := blobPath(dir, l.hex())
		if st, err := os.Stat(final); err == nil && st.Size() == l.Size {
			continue
		}
		need += l.Size
		if st, err := os.Stat(final + "-partial"); err == nil && st.Size() <= l.Size {
			need -= st.Size()
		}
	}
	free, ok := freeBytes(dir)
	if ok && need > free {
		return fmt.Errorf("%s: not enough disk space in %s: %s more is needed, %s is free", r, dir, humanBytes(need), humanBytes(free))
	}
	return nil
}

// writeManifest records a name's manifest, replacing any the name had
// (in any case), and removes the blobs only the old one used.
func writeManifest(dir string, r Ref, m manifest) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	path := manifestPath(dir, r)
	old, hadOld := findManifest(dir, r)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := writeAtomic(path, data); err != nil {
		return fmt.Errorf("%s: writing the manifest: %w", r, err)
	}
	if hadOld {
		if old.path != path {
			os.Remove(old.path)
			pruneDirs(dir, filepath.Dir(old.path))
		}
		prune(dir, old.m)
	}
	return nil
}

func manifestPath(dir string, r Ref) string {
	return filepath.Join(append([]string{dir, "manifests"}, r.parts()...)...)
}
