package safetensors

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Index is a checkpoint's index of shards, Hugging Face's *.index.json
// (model.safetensors.index.json, pytorch_model.bin.index.json): the file
// each tensor is in.
type Index struct {
	Path      string
	WeightMap map[string]string
}

// ReadIndex reads the index at path, which names at least one tensor;
// what says what kind of index it should be, for the error.
func ReadIndex(path, what string) (Index, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Index{}, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return Index{}, fmt.Errorf("%s: not %s: %v", path, what, err)
	}
	if len(idx.WeightMap) == 0 {
		return Index{}, fmt.Errorf("%s: weight_map names no tensors", path)
	}
	return Index{Path: path, WeightMap: idx.WeightMap}, nil
}

// Load reads the shards the index names, each with read (a shard's path:
// its tensors by name), and checks that they hold exactly the index's
// tensors, each once, in the shard the index places it.
func (x Index) Load(read func(path string) (map[string]*Tensor, error)) (map[string]*Tensor, error) {
	shards, err := x.shards()
	if err != nil {
		return nil, err
	}
	all := map[string]*Tensor{}
	for _, s := range shards {
		path := filepath.Join(filepath.Dir(x.Path), s)
		ts, err := read(path)
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(ts)) {
			if prev, ok := all[k]; ok {
				return nil, fmt.Errorf("%s: tensor %q is also in %s", path, k, prev.File)
			}
			if err := x.place(path, k); err != nil {
				return nil, err
			}
			all[k] = ts[k]
		}
	}
	return all, x.missing(func(k string) bool { return all[k] != nil })
}

// shards lists the distinct files the index names, in name order: each a
// file beside the index.
func (x Index) shards() ([]string, error) {
	for _, name := range x.WeightMap {
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return nil, fmt.Errorf("%s: shard %q is not a file name in the directory", x.Path, name)
		}
	}
	return slices.Compact(slices.Sorted(maps.Values(x.WeightMap))), nil
}

// place reports an error where tensor name, read from file, is not where
// the index places it.
func (x Index) place(file, name string) error {
	if x.WeightMap[name] != filepath.Base(file) {
		return fmt.Errorf("%s: tensor %q is not the index's (%s names %q)", file, name, filepath.Base(x.Path), x.WeightMap[name])
	}
	return nil
}

// missing reports the first tensor (in name order) the index names that
// has says was not read, naming the shard it should be in.
func (x Index) missing(has func(name string) bool) error {
	for _, k := range slices.Sorted(maps.Keys(x.WeightMap)) {
		if !has(k) {
			return fmt.Errorf("%s: tensor %q, which %s places there, is missing",
				filepath.Join(filepath.Dir(x.Path), x.WeightMap[k]), k, filepath.Base(x.Path))
		}
	}
	return nil
}
