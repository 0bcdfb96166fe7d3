package safetensors

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"dovetail/quant"
)

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func u16Bytes(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

// sample holds one tensor of each dtype with values exact in it.
func sample() []*Tensor {
	i64 := make([]byte, 16)
	binary.LittleEndian.PutUint64(i64, uint64(7))
	binary.LittleEndian.PutUint64(i64[8:], uint64(math.MaxUint64)) // -1
	i32 := make([]byte, 8)
	binary.LittleEndian.PutUint32(i32, uint32(0xfffffffe)) // -2
	binary.LittleEndian.PutUint32(i32[4:], 3)
	return []*Tensor{
		{Name: "f32", DType: "F32", Shape: []int{2, 2}, Data: f32Bytes(1, -2.5, 0.125, 3)},
		{Name: "f16", DType: "F16", Shape: []int{3}, Data: u16Bytes(quant.F32ToF16(1.5), quant.F32ToF16(-0.25), quant.F32ToF16(1024))},
		{Name: "bf16", DType: "BF16", Shape: []int{2}, Data: u16Bytes(quant.F32ToBF16(-3), quant.F32ToBF16(0.5))},
		{Name: "i64", DType: "I64", Shape: []int{2}, Data: i64},
		{Name: "i32", DType: "I32", Shape: []int{2}, Data: i32},
		{Name: "bool", DType: "BOOL", Shape: []int{3}, Data: []byte{1, 0, 1}},
		{Name: "empty", DType: "F32", Shape: []int{0, 4}, Data: nil},
	}
}

func TestWriteRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := Write(path, sample(), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata["format"] != "pt" || len(f.Tensors) != 7 {
		t.Fatalf("metadata %v, %d tensors", f.Metadata, len(f.Tensors))
	}
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); (8+n)%8 != 0 {
		t.Errorf("data section at %d, not 8-aligned", 8+n)
	}
	floats := map[string][]float32{"f32": {1, -2.5, 0.125, 3}, "f16": {1.5, -0.25, 1024}, "bf16": {-3, 0.5}, "empty": {}}
	for name, want := range floats {
		got, err := f.Tensors[name].Float32()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v %v, want %v", name, got, err, want)
		}
	}
	if v, err := f.Tensors["i64"].Int64s(); err != nil || !reflect.DeepEqual(v, []int64{7, -1}) {
		t.Errorf("i64: %v %v", v, err)
	}
	if v, err := f.Tensors["i32"].Int64s(); err != nil || !reflect.DeepEqual(v, []int64{-2, 3}) {
		t.Errorf("i32: %v %v", v, err)
	}
	if v, err := f.Tensors["bool"].Bools(); err != nil || !reflect.DeepEqual(v, []bool{true, false, true}) {
		t.Errorf("bool: %v %v", v, err)
	}
}

func TestWrongDTypeConversions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	s := sample()
	s[5].Data = []byte{1, 2, 0}
	if err := Write(path, s, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check := func(what string, err error, want string) {
		if err == nil || !strings.HasPrefix(err.Error(), path+": tensor ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", what, err, want)
		}
	}
	_, err = f.Tensors["i64"].Float32()
	check("Float32 of I64", err, "dtype I64, want F32, F16 or BF16")
	_, err = f.Tensors["f32"].Int64s()
	check("Int64s of F32", err, "dtype F32, want I64 or I32")
	_, err = f.Tensors["f32"].Bools()
	check("Bools of F32", err, "dtype F32, want BOOL")
	_, err = f.Tensors["bool"].Bools()
	check("Bools of 2", err, "value 2 at 1 is not a boolean")
}

func TestWriteRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	cases := map[string][]*Tensor{
		"bytes for shape": {{Name: "a", DType: "F32", Shape: []int{3}, Data: make([]byte, 8)}},
		"named twice":     {{Name: "a", DType: "BOOL", Shape: []int{1}, Data: []byte{0}}, {Name: "a", DType: "BOOL", Shape: []int{1}, Data: []byte{0}}},
		"unsupported":     {{Name: "a", DType: "F8", Shape: []int{1}, Data: []byte{0}}},
	}
	for want, ts := range cases {
		if err := Write(path, ts, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a file was left", want)
		}
	}
}

func TestNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	cases := []struct {
		t    *Tensor
		want int
	}{
		{&Tensor{DType: "F32", Data: f32Bytes(1, 2, inf)}, 2},
		{&Tensor{DType: "F32", Data: f32Bytes(1, math.MaxFloat32)}, -1},
		{&Tensor{DType: "F16", Data: u16Bytes(quant.F32ToF16(1), quant.F32ToF16(nan))}, 1},
		{&Tensor{DType: "F16", Data: u16Bytes(quant.F32ToF16(65504))}, -1},
		{&Tensor{DType: "BF16", Data: u16Bytes(quant.F32ToBF16(inf), 0)}, 0},
		{&Tensor{DType: "BF16", Data: u16Bytes(quant.F32ToBF16(3e38))}, -1},
	}
	for i, c := range cases {
		if got := c.t.NonFinite(); got != c.want {
			t.Errorf("case %d (%s): %d, want %d", i, c.t.DType, got, c.want)
		}
	}
}
