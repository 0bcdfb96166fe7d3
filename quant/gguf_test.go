package quant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// A minimal GGUF v2/v3 tensor locator, private to the tests: package quant
// sits below the model readers and must not import them. It reads the header,
// skips the metadata (keeping only general.alignment), and returns each
// tensor's type, shape and bytes.

type ggufTensor struct {
	name string
	dims []uint64
	typ  Type
	data []byte
}

func (t *ggufTensor) n() int {
	n := 1
	for _, d := range t.dims {
		n *= int(d)
	}
	return n
}

type ggufReader struct {
	b   []byte
	off int
	err error
}

func (r *ggufReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.off+n > len(r.b) {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *ggufReader) u32() uint32 {
	if s := r.take(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (r *ggufReader) u64() uint64 {
	if s := r.take(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (r *ggufReader) str() string {
	n := r.u64()
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string length %d", n)
		return ""
	}
	return string(r.take(int(n)))
}

// GGUF metadata value types and their fixed sizes (0 for string and array).
var ggufValueSize = map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 0, 9: 0, 10: 8, 11: 8, 12: 8}

// skipValue skips one metadata value of type vt and returns it as a uint64
// when it is an integer (for general.alignment).
func (r *ggufReader) skipValue(vt uint32) uint64 {
	switch vt {
	case 8:
		r.str()
		return 0
	case 9:
		et, n := r.u32(), r.u64()
		if sz, ok := ggufValueSize[et]; ok && sz > 0 {
			if n > uint64(len(r.b)) {
				r.err = fmt.Errorf("array length %d", n)
				return 0
			}
			r.take(int(n) * sz)
			return 0
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			r.skipValue(et)
		}
		return 0
	}
	sz, ok := ggufValueSize[vt]
	if !ok {
		r.err = fmt.Errorf("unknown metadata type %d", vt)
		return 0
	}
	s := r.take(sz)
	var v uint64
	for i := len(s) - 1; i >= 0; i-- {
		v = v<<8 | uint64(s[i])
	}
	return v
}

func readGGUF(path string) (map[string]*ggufTensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &ggufReader{b: b}
	if string(r.take(4)) != "GGUF" {
		return nil, fmt.Errorf("%s: not a GGUF file", path)
	}
	if v := r.u32(); v != 2 && v != 3 {
		return nil, fmt.Errorf("%s: GGUF version %d", path, v)
	}
	nt, nkv := r.u64(), r.u64()
	align := uint64(32)
	for i := uint64(0); i < nkv && r.err == nil; i++ {
		key := r.str()
		v := r.skipValue(r.u32())
		if key == "general.alignment" {
			align = v
		}
	}
	if align == 0 || align&(align-1) != 0 {
		return nil, fmt.Errorf("%s: alignment %d", path, align)
	}
	type info struct {
		t   *ggufTensor
		off uint64
	}
	var infos []info
	for i := uint64(0); i < nt && r.err == nil; i++ {
		t := &ggufTensor{name: r.str()}
		nd := r.u32()
		if nd > 4 {
			return nil, fmt.Errorf("%s: tensor %q has %d dims", path, t.name, nd)
		}
		for range nd {
			t.dims = append(t.dims, r.u64())
		}
		t.typ = Type(r.u32())
		infos = append(infos, info{t, r.u64()})
	}
	if r.err != nil {
		return nil, fmt.Errorf("%s: %w", path, r.err)
	}
	base := (uint64(r.off) + align - 1) / align * align
	out := make(map[string]*ggufTensor, len(infos))
	for _, in := range infos {
		size, err := in.t.typ.RowSize(in.t.n())
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", path, in.t.name, err)
		}
		start := base + in.off
		if start+uint64(size) > uint64(len(b)) {
			return nil, fmt.Errorf("%s: tensor %q runs past the end", path, in.t.name)
		}
		in.t.data = b[start : start+uint64(size)]
		out[in.t.name] = in.t
	}
	return out, nil
}

func modelPath(dir, file string) string {
	return filepath.Join("..", "testdata", "models", dir, file)
}

// TestRealModels compares every tensor of the quantized and F16 test models
// with the same tensor of the f32 model they were made from: dequantized
// values must lie within each format's error bound, and requantizing the f32
// values with QuantizeRow must reproduce llama.cpp's bytes exactly (these
// files were quantized from f32 with ggml's reference quantizers).
func TestRealModels(t *testing.T) {
	for _, c := range []struct {
		dir, ref string
		files    map[string]Type // file name: the type most of its matrices have
	}{
		{"stories260K", "stories260K-f32.gguf", map[string]Type{
			"stories260K-F16.gguf": F16, "stories260K-Q8_0-mixed.gguf": Q8_0, "stories260K-Q4_0-mixed.gguf": Q4_0}},
		{"tinystories656K", "tinystories656K-f32.gguf", map[string]Type{
			"tinystories656K-F16.gguf": F16, "tinystories656K-Q8_0.gguf": Q8_0, "tinystories656K-Q4_0.gguf": Q4_0}},
	} {
		ref, err := readGGUF(modelPath(c.dir, c.ref))
		if err != nil {
			t.Fatal(err)
		}
		for f, main := range c.files {
			t.Run(f, func(t *testing.T) {
				tensors, err := readGGUF(modelPath(c.dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if len(tensors) != len(ref) {
					t.Errorf("%d tensors, the f32 model has %d", len(tensors), len(ref))
				}
				seen := map[Type]int{}
				for name, qt := range tensors {
					rt := ref[name]
					if rt == nil || rt.typ != F32 || fmt.Sprint(rt.dims) != fmt.Sprint(qt.dims) {
						t.Errorf("%s: no f32 tensor of shape %v in %s", name, qt.dims, c.ref)
						continue
					}
					seen[qt.typ]++
					compareTensor(t, name, qt, rt)
				}
				if seen[main] < len(tensors)/2 {
					t.Errorf("only %d of %d tensors are %v: %v", seen[main], len(tensors), main, seen)
				}
			})
		}
	}
}

func compareTensor(t *testing.T, name string, qt, rt *ggufTensor) {
	t.Helper()
	n, rowLen := qt.n(), int(qt.dims[0])
	x := make([]float32, n)
	if err := DequantizeRow(F32, x, rt.data); err != nil {
		t.Fatal(err)
	}
	// Dequantize row by row, as a matmul would read the tensor.
	y := make([]float32, n)
	rowBytes, err := qt.typ.RowSize(rowLen)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for r := 0; r < n/rowLen; r++ {
		if err := DequantizeRow(qt.typ, y[r*rowLen:(r+1)*rowLen], qt.data[r*rowBytes:(r+1)*rowBytes]); err != nil {
			t.Fatalf("%s row %d: %v", name, r, err)
		}
	}
	switch qt.typ {
	case F32:
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s value %d: %v, f32 model has %v", name, i, y[i], x[i])
			}
		}
	case F16:
		for i := range x {
			// Relative 2^-11 (half an ulp) for normals, 2^-25 for subnormals.
			bound := math.Max(math.Abs(float64(x[i]))*0x1p-11, 0x1p-25)
			if e := math.Abs(float64(y[i] - x[i])); e > bound {
				t.Fatalf("%s value %d: %v, f32 model has %v (error %g > %g)", name, i, y[i], x[i], e, bound)
			}
		}
	case Q8_0, Q4_0:
		for b := 0; b < n/QK; b++ {
			d16 := f16At(qt.data[b*qt.typ.TypeSize():])
			xs, ys := x[b*QK:(b+1)*QK], y[b*QK:(b+1)*QK]
			bound := blockBound(qt.typ, xs, d16, 0)
			for i := range xs {
				if e := math.Abs(float64(ys[i] - xs[i])); e > bound {
					t.Fatalf("%s block %d value %d: %v, f32 model has %v (error %g > bound %g)", name, b, i, ys[i], xs[i], e, bound)
				}
			}
		}
	default:
		t.Fatalf("%s: no check for type %v", name, qt.typ)
	}
	again := make([]byte, len(qt.data))
	if err := QuantizeRow(qt.typ, again, x); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(again, qt.data) {
		for i := range again {
			if again[i] != qt.data[i] {
				t.Fatalf("%s: QuantizeRow(%v) differs from the file at byte %d (block %d): %#x, file %#x",
					name, qt.typ, i, i/qt.typ.TypeSize(), again[i], qt.data[i])
			}
		}
	}
	// The int8 dot products on real weights, against the dequantized dot.
	if qt.typ == Q8_0 || qt.typ == Q4_0 {
		act := make([]float32, rowLen)
		for i := range act {
			act[i] = float32(math.Sin(float64(i)))
		}
		xq := make([]byte, rowLen/QK*blockQ8_0)
		if err := QuantizeRow(Q8_0, xq, act); err != nil {
			t.Fatal(err)
		}
		av := make([]float32, rowLen)
		_ = DequantizeRow(Q8_0, av, xq)
		for r := 0; r < min(4, n/rowLen); r++ {
			w := qt.data[r*rowBytes : (r+1)*rowBytes]
			var want, mag float64
			for i, a := range av {
				p := float64(y[r*rowLen+i]) * float64(a)
				want += p
				mag += math.Abs(p)
			}
			var got float32
			if qt.typ == Q8_0 {
				got = DotQ8_0(w, xq, rowLen)
			} else {
				got = DotQ4_0Q8_0(w, xq, rowLen)
			}
			if d := math.Abs(float64(got) - want); d > float64(rowLen/QK+4)*0x1p-23*mag {
				t.Errorf("%s row %d: int8 dot %v, dequantized dot %v", name, r, got, want)
			}
		}
	}
}
