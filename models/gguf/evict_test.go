package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Evicting a mapped tensor keeps its bytes readable and unchanged (they
// come back from the file); bytes outside the mapping are left alone.
func TestEvict(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "models", "stories260K", "stories260K-Q8_0-mixed.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	big := &f.Tensors[0]
	for i := range f.Tensors {
		if f.Tensors[i].Size > big.Size {
			big = &f.Tensors[i]
		}
	}
	data := f.TensorData(big)
	want := bytes.Clone(data)
	f.Evict(data)
	if !bytes.Equal(data, want) {
		t.Fatalf("tensor %s changed after Evict", big.Name)
	}
	mine := bytes.Repeat([]byte{7}, 1<<16) // Go memory: must survive
	f.Evict(mine)
	if !bytes.Equal(mine, bytes.Repeat([]byte{7}, 1<<16)) {
		t.Fatal("Evict dropped memory outside the mapping")
	}
	// A file parsed from memory evicts nothing either.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	gt, _ := g.Tensor(big.Name)
	gd := g.TensorData(gt)
	g.Evict(gd)
	if !bytes.Equal(gd, want) {
		t.Fatal("Evict changed a tensor of a file parsed from memory")
	}
}
