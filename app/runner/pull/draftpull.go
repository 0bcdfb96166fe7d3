package pull

import (
	"context"
	"errors"
	"fmt"
	"time"

	"dovetail/models/eagle"
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
