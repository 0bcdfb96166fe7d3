package safetensors

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Hugging Face's file names for a model's weights in a directory.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
	pickleFile = "pytorch_model.bin"
)

// Dir is a model directory's weights: one file, or the shards an index
// names, each tensor in exactly one of them.
type Dir struct {
	Path    string
	Files   []*File
	Tensors map[string]*Tensor
}

// OpenDir opens dir's model.safetensors, or the shards named by its
// model.safetensors.index.json. Close releases them.
func OpenDir(dir string) (*Dir, error) {
	index := filepath.Join(dir, IndexFile)
	if _, err := os.Stat(index); err == nil {
		return openShards(dir, index)
	}
	single := filepath.Join(dir, SingleFile)
	_, err := os.Stat(single)
	switch {
	case err == nil:
		f, err := Open(single)
		if err != nil {
			return nil, err
		}
		return &Dir{Path: dir, Files: []*File{f}, Tensors: f.Tensors}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	return nil, missing(dir)
}

// missing explains a directory without safetensors weights; a PyTorch
// pickle gets the conversion (package torchbin reads one where a caller
// takes both, as package eagle does).
func missing(dir string) error {
	for _, name := range []string{pickleFile, pickleFile + ".index.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s holds %s, PyTorch's pickle format, not safetensors: convert it to %s "+
				"(python -c \"import torch; from safetensors.torch import save_file; "+
				"save_file({k: v.contiguous() for k, v in torch.load('%s', map_location='cpu').items()}, '%s')\")",
				dir, name, SingleFile, pickleFile, SingleFile)
		}
	}
	return fmt.Errorf("%s: no %s or %s", dir, SingleFile, IndexFile)
}

// openShards opens the files an index names and checks that they hold
// exactly the index's tensors, each once.
func openShards(dir, index string) (*Dir, error) {
	idx, err := ReadIndex(index, "a safetensors index")
	if err != nil {
		return nil, err
	}
	d := &Dir{Path: dir, Tensors: map[string]*Tensor{}}
	if err := d.openAll(idx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Dir) openAll(idx Index) (err error) {
	d.Tensors, err = idx.Load(func(path string) (map[string]*Tensor, error) {
		f, err := Open(path)
		if err != nil {
			return nil, err
		}
		d.Files = append(d.Files, f)
		return f.Tensors, nil
	})
	return err
}

// Names lists the tensors in name order.
func (d *Dir) Names() []string { return sortedNames(d.Tensors) }

// Close releases every file.
func (d *Dir) Close() error {
	var first error
	for _, f := range d.Files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.Files, d.Tensors = nil, nil
	return first
}
