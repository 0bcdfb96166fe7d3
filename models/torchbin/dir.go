package torchbin

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

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
	if _, err := os.Stat(index); errors.Is(err, fs.ErrNotExist) {
		ts, err := Read(filepath.Join(dir, FileName), data)
		if err != nil {
			return nil, err
		}
		return &safetensors.Dir{Path: dir, Tensors: ts}, nil
	}
	idx, err := safetensors.ReadIndex(index, "an index of shards")
	if err != nil {
		return nil, err
	}
	all, err := idx.Load(func(path string) (map[string]*safetensors.Tensor, error) { return Read(path, data) })
	if err != nil {
		return nil, err
	}
	return &safetensors.Dir{Path: dir, Tensors: all}, nil
}
