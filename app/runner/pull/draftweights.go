package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"dovetail/models/safetensors"
)

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
