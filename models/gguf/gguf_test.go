package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"dovetail/quant"
)

// sample builds a small file holding every metadata type, a nested array and
// two tensors.
func sample(t testing.TB) *Writer {
	w := NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("u8", uint8(7))
	w.Set("i8", int8(-7))
	w.Set("u16", uint16(700))
	w.Set("i16", int16(-700))
	w.Set("u32", uint32(70000))
	w.Set("i32", int32(-70000))
	w.Set("f32", float32(1.5))
	w.Set("bool", true)
	w.Set("u64", uint64(1)<<40)
	w.Set("i64", int64(-1)<<40)
	w.Set("f64", 2.25)
	w.Set("strs", []string{"a", "", "ü"})
	w.Set("ints", []int{1, -2, 3})
	w.Set("nested", Array{Type: TypeArray, Values: []Array{
		{Type: TypeUint8, Values: []uint8{1, 2}},
		{Type: TypeString, Values: []string{"x"}},
	}})
	w.Set("bools", Array{Type: TypeBool, Values: []bool{true, false}})
	f32 := make([]byte, 4*6)
	for i := range f32 {
		f32[i] = byte(i)
	}
	if err := w.AddTensor("a", quant.F32, []uint64{3, 2}, f32); err != nil {
		t.Fatal(err)
	}
	q8 := make([]byte, 34*2)
	q8[0] = 0x3c
	if err := w.AddTensor("b", quant.Q8_0, []uint64{32, 2}, q8); err != nil {
		t.Fatal(err)
	}
	return w
}

func encode(t testing.TB, w *Writer) []byte {
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	w := sample(t)
	img := encode(t, w)
	f, err := Parse("mem", img)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w.KVs, f.KVs); diff != "" {
		t.Errorf("metadata differs (-wrote +read):\n%s", diff)
	}
	if len(f.Tensors) != 2 {
		t.Fatalf("got %d tensors", len(f.Tensors))
	}
	for i, ti := range w.tensors {
		got, ok := f.Tensor(ti.Name)
		if !ok {
			t.Fatalf("tensor %q missing", ti.Name)
		}
		if diff := cmp.Diff(ti, *got); diff != "" {
			t.Errorf("tensor info differs:\n%s", diff)
		}
		if !bytes.Equal(f.TensorData(got), w.data[i]) {
			t.Errorf("tensor %q data differs", ti.Name)
		}
		if f.DataOffset%DefaultAlignment != 0 {
			t.Errorf("data offset %d unaligned", f.DataOffset)
		}
	}
	if n, _ := f.Uint("u64"); n != 1<<40 {
		t.Errorf("Uint(u64) = %d", n)
	}
	if n, ok := f.Uint("i32"); ok {
		t.Errorf("Uint of a negative value = %d, want not ok", n)
	}
	if x, _ := f.Float("f32"); x != 1.5 {
		t.Errorf("Float(f32) = %v", x)
	}
	if s, _ := f.Ints("ints"); !cmp.Equal(s, []int{1, -2, 3}) {
		t.Errorf("Ints = %v", s)
	}
	// Writing what was read gives the same bytes.
	w2 := NewWriter()
	for _, kv := range f.KVs {
		w2.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w2.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(encode(t, w2), img) {
		t.Error("re-encoding a parsed file changed its bytes")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := sample(t).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != 2 {
		t.Errorf("got %d tensors", len(f.Tensors))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("written with mode %v, want 0644", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	// A tensor whose data does not match its shape is refused up front.
	if err := NewWriter().AddTensor("x", quant.Q8_0, []uint64{31}, make([]byte, 34)); err == nil {
		t.Error("31 values of Q8_0 accepted")
	}
}

func TestEveryTruncationFails(t *testing.T) {
	img := encode(t, sample(t))
	for n := 0; n < len(img); n++ {
		_, err := Parse("cut.gguf", img[:n])
		if err == nil {
			t.Fatalf("file cut to %d of %d bytes parsed without error", n, len(img))
		}
		var ge *Error
		if !errors.As(err, &ge) || ge.File != "cut.gguf" {
			t.Fatalf("cut to %d: error %v does not name the file", n, err)
		}
	}
}

func TestCorruptFields(t *testing.T) {
	good := encode(t, sample(t))
	// Offsets of fields in the header: magic 0, version 4, tensor count 8, kv count 16.
	cases := []struct {
		name  string
		patch func(b []byte)
		field string
	}{
		{"magic", func(b []byte) { copy(b, "GGML") }, "magic"},
		{"version", func(b []byte) { b[4] = 9 }, "version"},
		{"big-endian", func(b []byte) { b[4], b[7] = 0, 3 }, "version"},
		{"tensor count", func(b []byte) { b[15] = 0x7f }, "tensor_count"},
		{"kv count", func(b []byte) { b[23] = 0x7f }, "metadata_kv_count"},
		{"key length", func(b []byte) { b[31] = 0x7f }, "metadata[0].key"},
	}
	for _, c := range cases {
		b := append([]byte(nil), good...)
		c.patch(b)
		_, err := Parse("bad.gguf", b)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.field)
		}
	}
	// A tensor type the reader does not know.
	w := NewWriter()
	w.AddTensor("t", quant.F32, []uint64{1}, make([]byte, 4))
	b := encode(t, w)
	i := bytes.Index(b, []byte{'t'}) + 1 + 4 + 8 // name, n_dims, dim
	b[i] = 99
	if _, err := Parse("bad.gguf", b); err == nil || !strings.Contains(err.Error(), `tensor "t".type`) {
		t.Errorf("unknown tensor type: %v", err)
	}
	// One ggml has and Dovetail does not read is named.
	b[i] = 34
	if _, err := Parse("bad.gguf", b); err == nil || !strings.Contains(err.Error(), "TQ1_0") {
		t.Errorf("TQ1_0 tensor: %v", err)
	}
}

func TestOpenRealModels(t *testing.T) {
	paths, _ := filepath.Glob("../../testdata/models/*/*.gguf")
	if len(paths) < 8 {
		t.Fatalf("found %d test models, want 8", len(paths))
	}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if arch, _ := f.String("general.architecture"); arch != "llama" {
			t.Errorf("%s: architecture %q", p, arch)
		}
		toks, ok := f.Strings("tokenizer.ggml.tokens")
		if !ok || len(toks) == 0 {
			t.Errorf("%s: no vocabulary", p)
		}
		emb, ok := f.Tensor("token_embd.weight")
		if !ok || emb.Dims[1] != uint64(len(toks)) {
			t.Errorf("%s: token_embd.weight %v, vocab %d", p, emb, len(toks))
		}
		f.Close()
	}
	if _, err := Open("../../testdata/golden/README.md"); err == nil || !strings.Contains(err.Error(), "not a GGUF file") {
		t.Errorf("opening a text file: %v", err)
	}
	if _, err := Open("no/such/file.gguf"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opening a missing file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	img := encode(f, sample(f))
	f.Add(img)
	f.Add(img[:len(img)/2])
	w := NewWriter()
	w.Set("general.alignment", uint32(64))
	w.Set("tokenizer.ggml.tokens", []string{"<s>", "a", "b"})
	w.AddTensor("x", quant.Q4_K, []uint64{256}, make([]byte, 144))
	f.Add(encode(f, w))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if uint64(len(file.TensorData(ti))) != ti.Size {
				t.Fatalf("tensor %q: %d bytes, info says %d", ti.Name, len(file.TensorData(ti)), ti.Size)
			}
		}
		for _, kv := range file.KVs {
			FormatValue(kv.Value)
		}
	})
}
