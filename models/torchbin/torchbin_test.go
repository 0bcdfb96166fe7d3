package torchbin

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"dovetail/models/safetensors"
)

// Files torch.save wrote: each tensor's storage read as its raw bytes,
// converted as the safetensors package converts them.
func TestReadsTorchSave(t *testing.T) {
	for file, want := range map[string][]float32{
		"tensor_bfloat16_proto2_zip.pt": {1.203125, -3.40625, 5.59375, -7.8125},
		"tensor_float16_proto2_zip.pt":  {1.2001953, -3.4003906, 5.6015625, -7.8007812},
	} {
		a, err := openArchive(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		tt, ok := a.obj.(*tensor)
		if !ok {
			t.Fatalf("%s holds %T", file, a.obj)
		}
		st, err := toTensor("x", tt, a.records, true)
		a.z.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.Float32()
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %v (%v), want %v", file, got, err, want)
		}
	}
	a, err := openArchive(filepath.Join("testdata", "tensor_int64_proto2_zip.pt"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.z.Close()
	st, err := toTensor("x", a.obj.(*tensor), a.records, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Int64s(); err != nil || !slices.Equal(got, []int64{1, -2, 3, -4}) {
		t.Fatalf("int64: %v (%v)", got, err)
	}
}

// A state dict written as torch.save writes one reads back: names,
// dtypes, shapes and bytes; without data, the same but no bytes.
func TestRoundTrip(t *testing.T) {
	f32 := make([]byte, 4*6)
	for i := range 6 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)-2.5))
	}
	in := []*safetensors.Tensor{
		{Name: "fc.weight", DType: "F32", Shape: []int{2, 3}, Data: f32},
		{Name: "norm.weight", DType: "BF16", Shape: []int{4}, Data: []byte{0x80, 0x3f, 0, 0x40, 0x40, 0x40, 0x80, 0x40}},
		{Name: "d2t", DType: "I64", Shape: []int{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{Name: "t2d", DType: "BOOL", Shape: []int{3}, Data: []byte{1, 0, 1}},
	}
	path := filepath.Join(t.TempDir(), FileName)
	if err := Write(path, in); err != nil {
		t.Fatal(err)
	}
	for _, data := range []bool{true, false} {
		got, err := Read(path, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(in) {
			t.Fatalf("%d tensors, wrote %d", len(got), len(in))
		}
		for _, w := range in {
			g := got[w.Name]
			if g == nil || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) {
				t.Fatalf("%s: read %+v", w.Name, g)
			}
			if data && !slices.Equal(g.Data, w.Data) || !data && g.Data != nil {
				t.Fatalf("%s (data %v): bytes %v, wrote %v", w.Name, data, g.Data, w.Data)
			}
		}
	}
}

// What is not a state dict of tensors is refused with a line naming the
// file and what was wrong; a pickle naming any other class never runs.
func TestRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "notzip.bin")
	os.WriteFile(bad, []byte("\x80\x02}q\x00."), 0o644) // a legacy (non-zip) file
	if _, err := Read(bad, true); err == nil || !strings.Contains(err.Error(), "1.6 or later") {
		t.Fatalf("a legacy pickle: %v", err)
	}
	single := filepath.Join("testdata", "tensor_float16_proto2_zip.pt")
	if _, err := Read(single, true); err == nil || !strings.Contains(err.Error(), "not a state dict") {
		t.Fatalf("a single tensor: %v", err)
	}
	if _, err := findClass("os", "system"); err == nil || !strings.Contains(err.Error(), "os.system") {
		t.Fatalf("os.system: %v", err)
	}
	short := []*safetensors.Tensor{{Name: "w", DType: "F32", Shape: []int{4}, Data: make([]byte, 8)}}
	path := filepath.Join(dir, FileName)
	if err := Write(path, short); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path, true); err == nil || !strings.Contains(err.Error(), `"w"`) {
		t.Fatalf("a tensor larger than its storage: %v", err)
	}
}

// A checkpoint in shards is read through its index: each tensor from the
// shard the index places it in; one elsewhere, or missing, is refused
// naming the file.
func TestReadDirShards(t *testing.T) {
	f32 := func(name string) *safetensors.Tensor {
		return &safetensors.Tensor{Name: name, DType: "F32", Shape: []int{1}, Data: []byte{0, 0, 128, 63}}
	}
	dir := t.TempDir()
	for shard, names := range map[string][]string{"a.bin": {"x", "y"}, "b.bin": {"z"}} {
		var ts []*safetensors.Tensor
		for _, n := range names {
			ts = append(ts, f32(n))
		}
		if err := Write(filepath.Join(dir, shard), ts); err != nil {
			t.Fatal(err)
		}
	}
	index := filepath.Join(dir, IndexName)
	for _, c := range []struct{ weightMap, err string }{
		{`{"x": "a.bin", "y": "a.bin", "z": "b.bin"}`, ""},
		{`{"x": "a.bin", "y": "b.bin", "z": "b.bin"}`, `a.bin: tensor "y" is not the index's`},
		{`{"x": "a.bin", "y": "a.bin", "z": "b.bin", "w": "b.bin"}`, `b.bin: tensor "w", which ` + IndexName + ` places there, is missing`},
		{`{"x": "../a.bin"}`, `shard "../a.bin" is not a file name`},
		{`{}`, "weight_map names no tensors"},
	} {
		if err := os.WriteFile(index, []byte(`{"weight_map": `+c.weightMap+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := ReadDir(dir, true)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.weightMap, err)
		case c.err == "" && (len(d.Tensors) != 3 || d.Tensors["z"] == nil || !strings.HasSuffix(d.Tensors["z"].File, "b.bin")):
			t.Errorf("%s: read %v", c.weightMap, d.Tensors)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.weightMap, err, c.err)
		}
	}
}
