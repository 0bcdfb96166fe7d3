package eagle

import (
	"os"
	"path/filepath"

	"dovetail/models/safetensors"
	"dovetail/models/torchbin"
)

// openWeights opens dir's weights: safetensors (memory-mapped) where the
// directory has them, else a PyTorch checkpoint (pytorch_model.bin, as
// EAGLE's own releases are published), read into memory; without data
// only its names, dtypes and shapes.
func openWeights(dir string, data bool) (*safetensors.Dir, error) {
	for _, n := range []string{safetensors.SingleFile, safetensors.IndexFile} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return safetensors.OpenDir(dir)
		}
	}
	if torchbin.Exists(dir) {
		return torchbin.ReadDir(dir, data)
	}
	return safetensors.OpenDir(dir) // says what is missing
}
