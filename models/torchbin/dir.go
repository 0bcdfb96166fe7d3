package torchbin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"dovetail/models/safetensors"
)

// Exists reports whether dir holds a PyTorch checkpoint (one file or an
// index of shards).
func Exists(dir string) bool {
	for _, n := range []string{FileName, IndexName} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// ReadDir reads dir's pytorch_model.bin, or the shards its
// pytorch_model.bin.index.json names (each tensor in the shard the index
// places it, once), as Read does.
func ReadDir(dir string, data bool) (*safetensors.Dir, error) {
	index := filepath.Join(dir, IndexName)
	b, err := os.ReadFile(index)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ts, err := Read(filepath.Join(dir, FileName), data)
		if err != nil {
			return nil, err
		}
		return &safetensors.Dir{Path: dir, Tensors: ts}, nil
	case err != nil:
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: not an index of shards (%v)", index, err)
	}
	var shards []string
	for _, s := range idx.WeightMap {
		if s != filepath.Base(s) || strings.HasPrefix(s, ".") {
			return nil, fmt.Errorf("%s: shard %q is not a file beside it", index, s)
		}
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	all := map[string]*safetensors.Tensor{}
	for _, s := range shards {
		ts, err := Read(filepath.Join(dir, s), data)
		if err != nil {
			return nil, err
		}
		for name, t := range ts {
			if idx.WeightMap[name] != s {
				return nil, fmt.Errorf("%s: tensor %q is not the index's (it places it in %q)", t.File, name, idx.WeightMap[name])
			}
			all[name] = t
		}
	}
	for name, s := range idx.WeightMap {
		if all[name] == nil {
			return nil, fmt.Errorf("%s: tensor %q, which %s places there, is missing", filepath.Join(dir, s), name, IndexName)
		}
	}
	return &safetensors.Dir{Path: dir, Tensors: all}, nil
}
