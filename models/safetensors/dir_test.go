package safetensors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeIndex(t *testing.T, dir, json string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
}

func vec(name string) *Tensor {
	return &Tensor{Name: name, DType: "F32", Shape: []int{1}, Data: f32Bytes(1)}
}

// shards writes two shards, a and b in the first, c in the second.
func shards(t *testing.T) string {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "model-00001-of-00002.safetensors"), []*Tensor{vec("a"), vec("b")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "model-00002-of-00002.safetensors"), []*Tensor{vec("c")}, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

const goodIndex = `{"metadata":{"total_size":12},"weight_map":{"a":"model-00001-of-00002.safetensors",
	"b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}}`

func TestOpenDirShards(t *testing.T) {
	dir := shards(t)
	writeIndex(t, dir, goodIndex)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := strings.Join(d.Names(), ","); got != "a,b,c" || len(d.Files) != 2 {
		t.Errorf("tensors %s in %d files", got, len(d.Files))
	}
	if !strings.HasSuffix(d.Tensors["c"].File, "model-00002-of-00002.safetensors") {
		t.Errorf("c from %s", d.Tensors["c"].File)
	}
}

func TestOpenDirSingle(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, SingleFile), []*Tensor{vec("a")}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil || len(d.Tensors) != 1 {
		t.Fatalf("%v %v", d, err)
	}
	d.Close()
}

func TestOpenDirRefuses(t *testing.T) {
	const s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	cases := []struct {
		name, index, want string
	}{
		{"missing", `{"weight_map":{"a":"` + s1 + `","b":"` + s1 + `","c":"` + s2 + `","d":"` + s2 + `"}}`,
			s2 + `: tensor "d", which model.safetensors.index.json places there, is missing`},
		{"not in index", `{"weight_map":{"a":"` + s1 + `","c":"` + s2 + `"}}`, s1 + `: tensor "b" is not the index's`},
		{"wrong shard", `{"weight_map":{"a":"` + s1 + `","b":"` + s2 + `","c":"` + s2 + `"}}`, s1 + `: tensor "b" is not the index's`},
		{"path", `{"weight_map":{"a":"../x.safetensors"}}`, `shard "../x.safetensors" is not a file name`},
		{"json", `{"weight_map":`, "not a safetensors index"},
		{"empty", `{"weight_map":{}}`, "weight_map names no tensors"},
	}
	for _, c := range cases {
		dir := shards(t)
		writeIndex(t, dir, c.index)
		if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A tensor in two shards.
	dir := shards(t)
	if err := Write(filepath.Join(dir, s2), []*Tensor{vec("c"), vec("a")}, nil); err != nil {
		t.Fatal(err)
	}
	writeIndex(t, dir, goodIndex)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), `tensor "a"`) {
		t.Errorf("twice: %v", err)
	}
}

func TestOpenDirPickle(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("PK"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenDir(dir)
	if err == nil || !strings.Contains(err.Error(), "PyTorch's pickle format, not safetensors") ||
		!strings.Contains(err.Error(), "safetensors.torch import save_file") || strings.Contains(err.Error(), "\n") {
		t.Errorf("%v", err)
	}
	if _, err := OpenDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no model.safetensors") {
		t.Errorf("empty: %v", err)
	}
}
