package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"dovetail/models/safetensors"
	"dovetail/models/torchbin"
)

// weightFormat is a way a draft's weights are published: one file, or an
// index naming shards of the extension.
type weightFormat struct{ single, index, ext string }

// weightFormats are tried in order: safetensors, then PyTorch's
// pytorch_model.bin (EAGLE's own releases), which package torchbin reads.
var weightFormats = []weightFormat{
	{safetensors.SingleFile, safetensors.IndexFile, ".safetensors"},
	{torchbin.FileName, torchbin.IndexName, ".bin"},
}

// draftWeights are the weights' files in the first format the repository
// has: its single file, else the index and every shard it names.
func draftWeights(ctx context.Context, f *fetcher, baseURL string, r Ref) ([]repoPart, error) {
	for _, w := range weightFormats {
		parts, err := w.files(ctx, f, baseURL, r)
		if !errors.Is(err, ErrNotFound) {
			return parts, err
		}
	}
	return nil, fmt.Errorf("%s: %w: the repository has no %s, %s, %s or %s", f.name, ErrNotFound,
		safetensors.SingleFile, safetensors.IndexFile, torchbin.FileName, torchbin.IndexName)
}

// files are w's files in the repository (ErrNotFound: it has neither the
// single file nor the index).
func (w weightFormat) files(ctx context.Context, f *fetcher, baseURL string, r Ref) ([]repoPart, error) {
	single, err := f.head(ctx, fileURL(baseURL, withFile(r, w.single)))
	if err == nil {
		return []repoPart{{name: w.single, rf: single}}, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	idx, err := f.head(ctx, fileURL(baseURL, withFile(r, w.index)))
	if err != nil {
		return nil, err
	}
	data, err := f.getSmall(ctx, idx, w.index)
	if err != nil {
		return nil, err
	}
	shards, err := w.shardFiles(f.name, data)
	if err != nil {
		return nil, err
	}
	parts := []repoPart{{name: w.index, rf: idx, data: data}}
	for _, s := range shards {
		rf, err := f.head(ctx, fileURL(baseURL, withFile(r, s)))
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%s: %s names the shard %s, which the repository does not have", f.name, w.index, s)
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
func (w weightFormat) shardFiles(name string, index []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: %s is not an index of shards (a weight_map naming them)", name, w.index)
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range idx.WeightMap {
		if seen[s] {
			continue
		}
		if !validPart(s, true) || !strings.HasSuffix(s, w.ext) || s == w.single {
			return nil, fmt.Errorf("%s: %s names the shard %q, not a %s file name", name, w.index, s, w.ext)
		}
		seen[s] = true
		out = append(out, s)
	}
	sort.Strings(out) // downloaded in order, whatever the map's
	return out, nil
}
