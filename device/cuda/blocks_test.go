package cuda

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"dovetail/quant"
)

// blocksShim is C around blocks.h: a row's dequantization, and its dot
// product with 8-bit activations, as quant.cu's kernels compute them a
// sub-block at a time.
const blocksShim = `#include "blocks.h"

void shim_dequant(int fmt, const uint8_t *row, int K, float *out) {
    if (fmt == FMT_F16 || fmt == FMT_BF16) {
        for (int k = 0; k < K; k++) out[k] = floatValue(fmt, row, k);
        return;
    }
    for (int sb = 0; sb < K / 32; sb++) {
        Sub s;
        readSub(&s, fmt, row, sb);
        for (int i = 0; i < 32; i++) out[32 * sb + i] = subValue(&s, i);
    }
}

void shim_dot(int fmt, const uint8_t *row, int K, const int8_t *xq, const float *ds, float *out) {
    float acc = 0;
    for (int sb = 0; sb < K / 32; sb++) {
        Sub s;
        readSub(&s, fmt, row, sb);
        acc += subDot(&s, (const int *)(xq + 32 * sb), ds[2 * sb], ds[2 * sb + 1]);
    }
    *out = acc;
}
`

// blocksLib is blocks.h compiled for the host by the C compiler, as the
// C kernels are; the test is skipped where there is none.
type blocksLib struct{ dequant, dot uintptr }

func loadBlocks(t *testing.T) *blocksLib {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: blocks.h is tested where there is one")
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "shim.c"), filepath.Join(dir, "shim.so")
	if err := os.WriteFile(src, []byte(blocksShim), 0o644); err != nil {
		t.Fatal(err)
	}
	// No contraction into fused multiply-adds: the products must round as
	// package quant's do.
	out, err := exec.Command(cc, "-O2", "-std=c11", "-Wall", "-Werror", "-ffp-contract=off", "-shared", "-fPIC",
		"-I", here, "-o", lib, src, "-lm").CombinedOutput()
	if err != nil {
		t.Fatalf("compiling blocks.h: %v\n%s", err, out)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	l := &blocksLib{}
	for _, f := range []struct {
		p    *uintptr
		name string
	}{{&l.dequant, "shim_dequant"}, {&l.dot, "shim_dot"}} {
		if *f.p, err = purego.Dlsym(h, f.name); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *blocksLib) dequantRow(typ quant.Type, row []byte, k int) []float32 {
	out := make([]float32, k)
	purego.SyscallN(l.dequant, uintptr(typ), uintptr(unsafe.Pointer(&row[0])), uintptr(k), uintptr(unsafe.Pointer(&out[0])))
	return out
}

func (l *blocksLib) dotRow(typ quant.Type, row []byte, k int, xq []int8, ds []float32) float32 {
	var out float32
	purego.SyscallN(l.dot, uintptr(typ), uintptr(unsafe.Pointer(&row[0])), uintptr(k),
		uintptr(unsafe.Pointer(&xq[0])), uintptr(unsafe.Pointer(&ds[0])), uintptr(unsafe.Pointer(&out)))
	return out
}

// quantizeQ8 is quantize_q8's arithmetic on the host: codes, and (scale,
// scale × Σ codes) per 32 values.
func quantizeQ8(x []float32) ([]int8, []float32) {
	xq, ds := make([]int8, len(x)), make([]float32, 2*len(x)/32)
	for sb := range len(x) / 32 {
		var amax float32
		for _, v := range x[32*sb : 32*sb+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		sum := 0
		for i, v := range x[32*sb : 32*sb+32] {
			q := int8(math.Round(float64(v * id)))
			xq[32*sb+i] = q
			sum += int(q)
		}
		ds[2*sb], ds[2*sb+1] = d, d*float32(sum)
	}
	return xq, ds
}

// blockTypes are the formats device.GPUKeepsBlocks names, with a row
// length of an odd number of their blocks.
var blockTypes = []struct {
	t quant.Type
	k int
}{
	{quant.Q4_0, 32 * 7}, {quant.Q8_0, 32 * 9}, {quant.Q4_K, 256 * 3}, {quant.Q5_K, 256 * 3},
	{quant.Q6_K, 256 * 5}, {quant.IQ4_XS, 256 * 3}, {quant.F16, 37}, {quant.BF16, 41},
}

// blockRows are rows of t: quantized from Gaussian values (what a model
// file holds), and random bytes with finite scales (every bit of every
// field, the 6-bit scales' high bits and the extreme codes among them).
func blockRows(t *testing.T, typ quant.Type, k int, rng *rand.Rand) [][]byte {
	rb, err := typ.RowSize(k)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]byte
	for range 3 {
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		row := make([]byte, rb)
		if err := quant.QuantizeRow(typ, row, x); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	for range 3 {
		row := make([]byte, rb)
		for i := range row {
			row[i] = byte(rng.Uint32())
		}
		finiteScales(typ, row, rng)
		rows = append(rows, row)
	}
	return rows
}

// finiteScales overwrites the half-precision fields of random blocks with
// finite values of moderate size, and F16/BF16 values likewise.
func finiteScales(typ quant.Type, row []byte, rng *rand.Rand) {
	put := func(off int) {
		h := quant.F32ToF16(float32(rng.NormFloat64() * 0.05))
		row[off], row[off+1] = byte(h), byte(h>>8)
	}
	var size int
	var at []int
	switch typ {
	case quant.Q4_0:
		size, at = 18, []int{0}
	case quant.Q8_0:
		size, at = 34, []int{0}
	case quant.Q4_K:
		size, at = 144, []int{0, 2}
	case quant.Q5_K:
		size, at = 176, []int{0, 2}
	case quant.Q6_K:
		size, at = 210, []int{208}
	case quant.IQ4_XS:
		size, at = 136, []int{0}
	case quant.F16:
		size, at = 2, []int{0}
	case quant.BF16:
		for i := 0; i < len(row); i += 2 {
			h := quant.F32ToBF16(float32(rng.NormFloat64()))
			row[i], row[i+1] = byte(h), byte(h>>8)
		}
		return
	}
	for b := 0; b < len(row); b += size {
		for _, o := range at {
			put(b + o)
		}
	}
}

// TestBlocksDequantize checks blocks.h's reading of every format the GPU
// keeps against quant's dequantization, value for value.
func TestBlocksDequantize(t *testing.T) {
	l := loadBlocks(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bt := range blockTypes {
		for ri, row := range blockRows(t, bt.t, bt.k, rng) {
			want := make([]float32, bt.k)
			if err := quant.DequantizeRow(bt.t, want, row); err != nil {
				t.Fatal(err)
			}
			got := l.dequantRow(bt.t, row, bt.k)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%v row %d: value %d is %g, quant says %g", bt.t, ri, i, got[i], want[i])
				}
			}
		}
	}
}

// TestBlocksDot checks the 8-bit dot product (dp4a's arithmetic) against
// the float64 product of the dequantized row with the dequantized
// activations: the integer sums are exact, so they agree to float32
// rounding of the per-block scales.
func TestBlocksDot(t *testing.T) {
	l := loadBlocks(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bt := range blockTypes {
		if bt.t == quant.F16 || bt.t == quant.BF16 {
			continue // no sub-blocks: mmv multiplies float activations
		}
		for ri, row := range blockRows(t, bt.t, bt.k, rng) {
			w := make([]float32, bt.k)
			if err := quant.DequantizeRow(bt.t, w, row); err != nil {
				t.Fatal(err)
			}
			x := make([]float32, bt.k)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			x[5] = 0 // a zero among them, and a block of zeros (scale 0)
			clear(x[32:64])
			xq, ds := quantizeQ8(x)
			var want, mag float64
			for i := range w {
				xv := float64(ds[2*(i/32)]) * float64(xq[i])
				want += float64(w[i]) * xv
				mag += math.Abs(float64(w[i]) * xv)
			}
			got := float64(l.dotRow(bt.t, row, bt.k, xq, ds))
			if math.Abs(got-want) > 1e-5*mag+1e-6 {
				t.Errorf("%v row %d: dot %g, dequantized product %g (Σ|w·x| %g)", bt.t, ri, got, want, mag)
			}
		}
	}
}
