package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"dovetail/models/eagle"
	"dovetail/models/safetensors"
)

// repoPart is one file of a draft's repository: a small one (config.json,
// the index) is held whole once fetched; a large one goes to blobs/ first,
// resumable and verified as a model's layer is.
type repoPart struct {
	name string
	rf   repoFile
	data []byte
	have string // the same file in the draft pulled before, linked instead of downloaded again
}

func (p repoPart) digest() string {
	if p.rf.sha256 != "" {
		return "sha256:" + p.rf.sha256
	}
	return "git:" + p.rf.gitSHA1
}

// pullDraft pulls hf.co/ORG/REPO as an EAGLE draft when its config.json
// describes one. Otherwise m.Draft is nil, and notDraft says what the
// config describes instead ("" without a config.json: a GGUF repository
// has none), for the GGUF pull tried instead.
func pullDraft(ctx context.Context, f *fetcher, baseURL, dir string, r Ref, o Options) (m Model, notDraft string, err error) {
	df := *f
	df.name = draftName(r)
	f = &df
	config, err := f.head(ctx, fileURL(baseURL, withFile(r, "config.json")))
	if errors.Is(err, ErrNotFound) {
		return Model{}, "", nil
	}
	if err != nil {
		return Model{}, "", err
	}
	data, err := f.getSmall(ctx, config, "config.json")
	if err != nil {
		return Model{}, "", err
	}
	c, perr := eagle.ParseConfig(data)
	if !c.LooksLikeDraft() {
		return Model{}, fmt.Sprintf("its config.json describes %s, not an EAGLE draft", archWords(c.Arch)), nil
	}
	if perr != nil {
		return Model{}, "", fmt.Errorf("%s: config.json describes an EAGLE draft (%s) that Dovetail cannot read: %v", f.name, archWords(c.Arch), perr)
	}
	o.Progress(Progress{Status: "pulling EAGLE draft"})
	parts, err := draftWeights(ctx, f, baseURL, r)
	if err != nil {
		return Model{}, "", err
	}
	parts = append([]repoPart{{name: "config.json", rf: config, data: data}}, parts...)
	if err := fetchParts(ctx, f, dir, r, parts, o); err != nil {
		return Model{}, "", err
	}
	o.Progress(Progress{Status: "writing draft"})
	d, err := placeDraft(dir, r, parts)
	if err != nil {
		return Model{}, "", err
	}
	return Model{Name: d.Name, Path: d.Dir, Size: d.Size, Pulled: time.Now(), Draft: &d}, "", nil
}

func withFile(r Ref, file string) Ref {
	r.File, r.Tag = file, ""
	return r
}

func archWords(arch string) string {
	if arch == "" {
		return "no architecture"
	}
	return arch
}

// draftWeights are the weights' files: model.safetensors, else the index
// and every shard it names. A repository with only PyTorch's pickle gets
// the conversion in one line.
func draftWeights(ctx context.Context, f *fetcher, baseURL string, r Ref) ([]repoPart, error) {
	single, err := f.head(ctx, fileURL(baseURL, withFile(r, safetensors.SingleFile)))
	if err == nil {
		return []repoPart{{name: safetensors.SingleFile, rf: single}}, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	idx, err := f.head(ctx, fileURL(baseURL, withFile(r, safetensors.IndexFile)))
	if errors.Is(err, ErrNotFound) {
		return nil, noSafetensors(ctx, f, baseURL, r)
	}
	if err != nil {
		return nil, err
	}
	data, err := f.getSmall(ctx, idx, safetensors.IndexFile)
	if err != nil {
		return nil, err
	}
	shards, err := shardFiles(f.name, data)
	if err != nil {
		return nil, err
	}
	parts := []repoPart{{name: safetensors.IndexFile, rf: idx, data: data}}
	for _, s := range shards {
		rf, err := f.head(ctx, fileURL(baseURL, withFile(r, s)))
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%s: %s names the shard %s, which the repository does not have", f.name, safetensors.IndexFile, s)
		}
		if err != nil {
			return nil, err
		}
		parts = append(parts, repoPart{name: s, rf: rf})
	}
	return parts, nil
}

// shardFiles are the files an index's weight_map names, each a plain
// file name: nothing a repository says reaches outside the draft's folder.
func shardFiles(name string, index []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: %s is not a safetensors index (a weight_map naming the shards)", name, safetensors.IndexFile)
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range idx.WeightMap {
		if seen[s] {
			continue
		}
		if !validPart(s, true) || !strings.HasSuffix(s, ".safetensors") || s == safetensors.SingleFile {
			return nil, fmt.Errorf("%s: %s names the shard %q, not a .safetensors file name", name, safetensors.IndexFile, s)
		}
		seen[s] = true
		out = append(out, s)
	}
	sort.Strings(out) // downloaded in order, whatever the map's
	return out, nil
}

// noSafetensors says what a draft's repository without safetensors
// weights has instead.
func noSafetensors(ctx context.Context, f *fetcher, baseURL string, r Ref) error {
	for _, pickle := range []string{"pytorch_model.bin", "pytorch_model.bin.index.json"} {
		if _, err := f.head(ctx, fileURL(baseURL, withFile(r, pickle))); err == nil {
			return fmt.Errorf("%s: the draft's weights are published only as %s, PyTorch's pickle format: Dovetail reads safetensors; "+
				"download the repository (huggingface-cli download %s/%s --local-dir DIR), convert them in DIR "+
				"(python -c \"import torch; from safetensors.torch import save_file; save_file({k: v.contiguous() for k, v in torch.load('pytorch_model.bin', map_location='cpu').items()}, 'model.safetensors')\") "+
				"and run it with --draft eagle:DIR", f.name, pickle, r.Namespace, r.Model)
		}
	}
	return fmt.Errorf("%s: %w: the repository has no %s or %s", f.name, ErrNotFound, safetensors.SingleFile, safetensors.IndexFile)
}

// fetchParts downloads what is not held yet: a file in LFS into blobs/
// (the room for them checked first), a small one in git whole.
func fetchParts(ctx context.Context, f *fetcher, dir string, r Ref, parts []repoPart, o Options) error {
	pulled := pulledFiles(dir, r)
	var large []layer
	for i, p := range parts {
		if p.data == nil && p.rf.sha256 != "" {
			if path, ok := pulled[p.name+" "+p.digest()]; ok {
				parts[i].have = path
				continue
			}
			large = append(large, p.rf.layer())
		}
	}
	if err := checkSpace(dir, r, large); err != nil {
		return err
	}
	for i, p := range parts {
		if p.data != nil || p.have != "" {
			continue
		}
		if p.rf.sha256 == "" {
			b, err := f.getSmall(ctx, p.rf, p.name)
			if err != nil {
				return err
			}
			parts[i].data = b
			continue
		}
		if err := fetchBlob(ctx, f, dir, p.rf.layer(), p.rf.url, o.Progress); err != nil {
			return err
		}
	}
	return nil
}

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
