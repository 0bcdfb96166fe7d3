package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"dovetail/quant"
)

// Every level available on this machine is checked against the pure-Go
// reference ("go"), on shapes that are not powers of two, weight row ranges
// that do not start at 0, odd activation row counts, and padded strides.
// Inputs sit at the very end of a mapping followed by an unmapped page where
// the platform allows, so a kernel reading past its data crashes the test.

// sets returns the levels under test: every available one, "go" included
// (it must agree with itself, which checks the harness).
func sets(t testing.TB) []*Set {
	var out []*Set
	for _, name := range Available() {
		s, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestAvailable(t *testing.T) {
	got := Available()
	if got[0] != "go" {
		t.Fatalf("Available() = %v, want go first", got)
	}
	t.Logf("available: %v; %s", got, Notice())
	if anyEmbedded() && len(got) == 1 {
		t.Errorf("libraries are embedded but none loads: %s", Notice())
	}
}

// Every level this CPU runs whose library is embedded loads: a library
// that fails to (an unresolved symbol, a wrong ABI) would otherwise drop
// out of Available, and every test over the levels pass without it.
func TestEmbeddedLevelsLoad(t *testing.T) {
	for _, l := range nativeLevels() {
		if !cpuSupports(l) || embedded(l) == nil {
			continue
		}
		if _, err := ByName(l); err != nil {
			t.Errorf("level %s: %v", l, err)
		}
	}
}

// Every level names its build, and no two levels share one.
func TestBuild(t *testing.T) {
	seen := map[string]string{}
	for _, s := range sets(t) {
		if s.Build == "" {
			t.Errorf("%s: empty Build", s.Name)
		}
		if other, ok := seen[s.Build]; ok {
			t.Errorf("%s and %s share the build %q", s.Name, other, s.Build)
		}
		seen[s.Build] = s.Name
	}
}

func randFloats(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

func putF16(b []byte, v float32) { binary.LittleEndian.PutUint16(b, quant.F32ToF16(v)) }

// typeTest is what the tests must know of a type of the kernel table (see
// typeTests).
type typeTest struct {
	// scales are the byte offsets of a block's f16 scales (and minimums):
	// randWeights puts small finite values there, the rest of a block
	// being random bytes, and TestMatMulPackedExtremes 0.01.
	scales []int
	// terms is how many float32 terms a dot of 256 values adds in its
	// longest chain (see chain): 8 for a term a block of 32, 16 for one
	// per 16 values, the k-quants' 16 and their super-block's two offset
	// terms, 256 for floats.
	terms int
	// exact: every level adds each super-block's exact integer sum into
	// the result as the Go reference does (iq.h), so its results are the
	// reference's bit for bit.
	exact bool
}

// typeTests has a line for every type of the kernel table, its test line:
// the tests and benchmarks that cover every type take the types from the
// table and what they need to know of each from here.
var typeTests = map[quant.Type]typeTest{
	quant.Q8_0:   {scales: []int{0}, terms: 8},
	quant.Q4_0:   {scales: []int{0}, terms: 8},
	quant.Q5_0:   {scales: []int{0}, terms: 8},
	quant.Q4_1:   {scales: []int{0, 2}, terms: 16}, // a term for the values and one for the minimum
	quant.Q5_1:   {scales: []int{0, 2}, terms: 16},
	quant.IQ4_NL: {scales: []int{0}, terms: 8},
	quant.Q2_K:   {scales: []int{80, 82}, terms: 18},
	quant.Q3_K:   {scales: []int{108}, terms: 18},
	quant.Q4_K:   {scales: []int{0, 2}, terms: 18},
	quant.Q5_K:   {scales: []int{0, 2}, terms: 18},
	quant.Q6_K:   {scales: []int{208}, terms: 18},
	quant.IQ4_XS: {scales: []int{0}, terms: 8},
	quant.IQ3_S:  {scales: []int{0}, terms: 8, exact: true},
	// The other i-quants have a scale per 16 values at most.
	quant.IQ3_XXS: {scales: []int{0}, terms: 16, exact: true},
	quant.IQ2_XXS: {scales: []int{0}, terms: 16, exact: true},
	quant.IQ2_XS:  {scales: []int{0}, terms: 16, exact: true},
	quant.IQ2_S:   {scales: []int{0}, terms: 16, exact: true},
	quant.IQ1_S:   {scales: []int{0}, terms: 16, exact: true},
	quant.IQ1_M:   {terms: 16, exact: true}, // its scale is in four nibbles: see randWeights
	quant.F16:     {terms: 256},
	quant.BF16:    {terms: 256},
	quant.F32:     {terms: 256},
}

// TestKernelTable checks the kernel table against the tests' lines and
// quant's block sizes.
func TestKernelTable(t *testing.T) {
	for _, k := range table {
		if _, ok := typeTests[k.t]; !ok {
			t.Errorf("%v: in the kernel table without a line in typeTests", k.t)
		}
		// An activation row must be whole blocks of its form wherever the
		// weight row is whole blocks.
		if !k.t.Known() || k.t.BlockSize()%k.act.BlockSize() != 0 {
			t.Errorf("%v: activations %v do not fit its blocks", k.t, k.act)
		}
		switch k.act {
		case quant.Q8_0, quant.Q8_K, quant.F16, quant.BF16, quant.F32: // what Activations makes
		default:
			t.Errorf("%v: activations %v, which Activations does not make", k.t, k.act)
		}
	}
	for typ := range typeTests {
		if kernelOf(typ) == nil {
			t.Errorf("%v: a line in typeTests but none in the kernel table", typ)
		}
	}
}

// typicalCols is a row width for the tests of every type: 7 blocks of 32,
// or 3 super-blocks of 256.
func typicalCols(t quant.Type) int {
	if t.BlockSize() == quant.QKK {
		return 3 * quant.QKK
	}
	return 7 * quant.QK
}

// randWeights fills rows of rowBytes with weights of type t: even rows are
// quantized from random floats (realistic scales) if quantize is set, the
// others are random bytes
// with finite random scales, which reach the corners the quantizers avoid
// (Q8_0's -128, Q4_K's largest 6-bit scales, Q6_K's negative scales).
func randWeights(r *rand.Rand, t quant.Type, rows, cols, rowBytes int, dst []byte, quantize bool) {
	wsz, _ := t.RowSize(cols)
	for row := range rows {
		w := dst[row*rowBytes : row*rowBytes+wsz]
		if quantize && row%2 == 0 && quant.CanQuantize(t) {
			if err := quant.QuantizeRow(t, w, randFloats(r, cols, 1)); err != nil {
				panic(err)
			}
			continue
		}
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		bs, scales := t.TypeSize(), typeTests[t].scales
		for b := 0; b < len(w); b += bs {
			blk := w[b : b+bs]
			for _, o := range scales {
				putF16(blk[o:], float32(r.NormFloat64()*0.01))
			}
			switch t {
			case quant.IQ1_M: // the f16 scale in the top nibbles of the four scale words
				h := quant.F32ToF16(float32(r.NormFloat64() * 0.01))
				for k := range 4 {
					blk[49+2*k] = blk[49+2*k]&0x0f | byte(h>>(4*k)&0xf)<<4
				}
			case quant.F16:
				putF16(blk, float32(r.NormFloat64()))
			case quant.BF16:
				binary.LittleEndian.PutUint16(blk, quant.F32ToBF16(float32(r.NormFloat64())))
			case quant.F32:
				binary.LittleEndian.PutUint32(blk, math.Float32bits(float32(r.NormFloat64())))
			}
		}
	}
}

// randActs fills n activation rows in the form of t's weights.
func randActs(r *rand.Rand, t quant.Type, n, cols, actRowBytes int, dst []byte) {
	for j := range n {
		x := randFloats(r, cols, 1)
		if j%3 == 2 {
			x = randFloats(r, cols, 1e-3) // small rows: scales far from 1
		}
		a := dst[j*actRowBytes:]
		switch ActivationType(t) {
		case quant.Q8_0:
			goSet.QuantizeQ8_0(a, x)
		case quant.Q8_K:
			goSet.QuantizeQ8_K(a, x)
		case quant.F16:
			for i, v := range x {
				putF16(a[2*i:], v)
			}
		case quant.BF16:
			for i, v := range x {
				binary.LittleEndian.PutUint16(a[2*i:], quant.F32ToBF16(v))
			}
		default:
			for i, v := range x {
				binary.LittleEndian.PutUint32(a[4*i:], math.Float32bits(v))
			}
		}
	}
}

// magnitude is the sum of the absolute values of the float terms a kernel
// may form for dot(w, a): the dequantized products for most types, but for
// Q4_K, Q5_K and Q6_K the scaled quant products and the offset terms separately,
// since kernels compute those apart and only then subtract.
func magnitude(t quant.Type, w, a []byte, cols int) float64 {
	deq := func(typ quant.Type, b []byte) []float32 {
		x := make([]float32, cols)
		sz, _ := typ.RowSize(cols)
		if err := quant.DequantizeRow(typ, x, b[:sz]); err != nil {
			panic(err)
		}
		return x
	}
	x := deq(ActivationType(t), a)
	var m float64
	switch t {
	case quant.Q2_K:
		for b := 0; b < cols/quant.QKK; b++ {
			blk := w[b*84 : (b+1)*84]
			d := math.Abs(float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk[80:]))))
			dmin := math.Abs(float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk[82:]))))
			for i := range quant.QKK {
				sc := blk[i/16]
				m += (d*float64(sc&0xf)*3 + dmin*float64(sc>>4)) * math.Abs(float64(x[b*quant.QKK+i]))
			}
		}
	case quant.Q4_K, quant.Q5_K:
		bs, qs := 144, 16 // Q5_K: 176 bytes, the low nibbles after qh[32]
		if t == quant.Q5_K {
			bs, qs = 176, 48
		}
		for b := 0; b < cols/quant.QKK; b++ {
			blk := w[b*bs : (b+1)*bs]
			d := math.Abs(float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk))))
			dmin := math.Abs(float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))))
			for i := range quant.QKK {
				s := i / 32
				var sc, mn byte
				if s < 4 {
					sc, mn = blk[4+s]&63, blk[8+s]&63
				} else {
					sc, mn = blk[8+s]&0xf|(blk[s]>>6)<<4, blk[8+s]>>4|(blk[4+s]>>6)<<4
				}
				q := blk[qs+32*(i/64)+i%32]
				if i%64 >= 32 {
					q >>= 4
				}
				q &= 0xf
				if t == quant.Q5_K {
					q |= (blk[16+i%32] >> (i / 32) & 1) << 4
				}
				m += (d*float64(sc)*float64(q) + dmin*float64(mn)) * math.Abs(float64(x[b*quant.QKK+i]))
			}
		}
	case quant.Q6_K:
		wd := deq(t, w)
		for b := 0; b < cols/quant.QKK; b++ {
			blk := w[b*210 : (b+1)*210]
			d := math.Abs(float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk[208:]))))
			for i := range quant.QKK {
				sc := math.Abs(float64(int8(blk[192+i/16])))
				// |d*sc*(q-32)| + 64|d*sc| bounds |d*sc*q| + |32*d*sc| for q in [0, 63].
				v := math.Abs(float64(wd[b*quant.QKK+i])) + 64*d*sc
				m += v * math.Abs(float64(x[b*quant.QKK+i]))
			}
		}
	default:
		wd := deq(t, w)
		for i := range wd {
			m += math.Abs(float64(wd[i]) * float64(x[i]))
		}
	}
	return m
}

// chain is the length of the longest chain of float32 additions a dot of
// cols values may take: one term per block for Q8_0/Q4_0, per 16-value
// sub-block (plus the offset terms) for the k-quants, per value for floats
// (typeTests' terms; per value for a type without a line).
func chain(t quant.Type, cols int) int {
	if tt, ok := typeTests[t]; ok {
		return cols * tt.terms / 256
	}
	return cols
}

// tolerance bounds |kernel - reference| for one dot product. A float32
// sum of K terms, each formed with a few roundings, in any order, is within
// (K+3)·u·Σ|terms| of the exact value (u = 2^-24, first order), and so is
// the reference's; the two differ by at most twice that. The integer parts
// of the quantized dots are exact at every level, so they add nothing. With
// the shapes below the bound is about 1e-6 (Q8_0) to 3e-5 (F32, 224 terms)
// of the magnitude.
func tolerance(t quant.Type, cols int, mag float64) float64 {
	const u = 1.0 / (1 << 24)
	return 2*float64(chain(t, cols)+4)*u*mag + 1e-30
}

type mmCase struct {
	t          quant.Type
	rows, cols int
	lo, hi     int
}

func matmulCases() []mmCase {
	var cs []mmCase
	for _, k := range table {
		cols := typicalCols(k.t)
		cs = append(cs, mmCase{k.t, 37, cols, 5, 37}, mmCase{k.t, 37, cols, 1, 30})
	}
	return cs
}

const sentinel = -12345.5

func runMatMul(t *testing.T, c mmCase, ns []int, seed uint64) {
	r := rand.New(rand.NewPCG(seed, uint64(c.t)))
	wsz, _ := c.t.RowSize(c.cols)
	asz, _ := ActivationType(c.t).RowSize(c.cols)
	rowBytes, actRowBytes := wsz+6, asz+10 // padded strides
	w := guarded(t, (c.rows-1)*rowBytes+wsz)
	randWeights(r, c.t, c.rows, c.cols, rowBytes, w, true)
	for _, n := range ns {
		act := guarded(t, (n-1)*actRowBytes+asz)
		randActs(r, c.t, n, c.cols, actRowBytes, act)
		ldo := c.rows + 3
		want := make([]float32, (n-1)*ldo+c.hi)
		for i := range want {
			want[i] = sentinel
		}
		goSet.MatMul(c.t, want, ldo, w, rowBytes, c.lo, c.hi, act, actRowBytes, n, c.cols)
		for _, s := range sets(t) {
			name := fmt.Sprintf("%v/%s/rows[%d,%d)/n=%d", c.t, s.Name, c.lo, c.hi, n)
			got := make([]float32, len(want))
			for i := range got {
				got[i] = sentinel
			}
			s.MatMul(c.t, got, ldo, w, rowBytes, c.lo, c.hi, act, actRowBytes, n, c.cols)
			bad := 0
			for j := range n {
				for row := range ldo {
					i := j*ldo + row
					if i >= len(got) {
						break
					}
					if row < c.lo || row >= c.hi {
						if got[i] != sentinel {
							t.Errorf("%s: wrote out[%d] (row %d, act %d) outside [lo, hi)", name, i, row, j)
						}
						continue
					}
					mag := magnitude(c.t, w[row*rowBytes:], act[j*actRowBytes:], c.cols)
					tol := tolerance(c.t, c.cols, mag)
					if typeTests[c.t].exact {
						tol = 0 // the same float steps as the Go reference, at every level and n
					}
					if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol) && bad < 5 {
						bad++
						t.Errorf("%s: row %d act %d: got %g, want %g (diff %g > tol %g, magnitude %g)",
							name, row, j, got[i], want[i], d, tol, mag)
					}
				}
			}
		}
	}
}

func TestMatMul(t *testing.T) {
	for _, c := range matmulCases() {
		t.Run(fmt.Sprintf("%v", c.t), func(t *testing.T) {
			runMatMul(t, c, []int{1, 3, 17, 64}, 1)
		})
	}
}

// TestMatMulChunks crosses the AVX-512 kernels' internal limits: more
// activation blocks than their stack table holds (columns are then done in
// chunks added into out), more than 256 activation rows, and more than the
// i-quant tiles' 64.
func TestMatMulChunks(t *testing.T) {
	for _, t0 := range []quant.Type{quant.Q8_0, quant.Q4_0} {
		runMatMul(t, mmCase{t0, 21, 32 * 130, 3, 21}, []int{64}, 2)
		runMatMul(t, mmCase{t0, 19, 64, 0, 19}, []int{300}, 3)
	}
	runMatMul(t, mmCase{quant.Q4_K, 17, 256 * 2, 0, 17}, []int{33}, 4)
	for _, t0 := range []quant.Type{quant.Q8_0, quant.Q4_0} { // more blocks than AVX2's table of activation scales
		runMatMul(t, mmCase{t0, 3, 32 * 4100, 0, 3}, []int{2}, 8)
	}
	runMatMul(t, mmCase{quant.F16, 9, 19, 0, 9}, []int{5}, 5) // cols not a multiple of any vector width
	runMatMul(t, mmCase{quant.F32, 9, 3, 2, 9}, []int{2}, 6)
	// The i-quants' tiles (iqtile.h) hold the float sums of 64 activation
	// rows at a time, and take them four at a time and then one by one.
	for _, t0 := range []quant.Type{quant.IQ2_XXS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_S, quant.IQ1_M} {
		runMatMul(t, mmCase{t0, 35, 256 * 2, 2, 35}, []int{4, 5, 70, 131}, 7)
	}
}

func TestMatMulChecks(t *testing.T) {
	w := make([]byte, 34*4)
	act := make([]byte, 34)
	out := make([]float32, 4)
	cases := map[string]func(){
		"short w":      func() { goSet.MatMul(quant.Q8_0, out, 4, w[:100], 34, 0, 4, act, 34, 1, 32) },
		"short act":    func() { goSet.MatMul(quant.Q8_0, out, 4, w, 34, 0, 4, act[:20], 34, 1, 32) },
		"short out":    func() { goSet.MatMul(quant.Q8_0, out[:3], 4, w, 34, 0, 4, act, 34, 1, 32) },
		"bad cols":     func() { goSet.MatMul(quant.Q8_0, out, 4, w, 34, 0, 4, act, 34, 1, 33) },
		"small stride": func() { goSet.MatMul(quant.Q8_0, out, 4, w, 30, 0, 4, act, 34, 1, 32) },
		"overlap":      func() { goSet.MatMul(quant.Q8_0, make([]float32, 8), 2, w, 34, 0, 4, make([]byte, 68), 34, 2, 32) },
		"lo > hi":      func() { goSet.MatMul(quant.Q8_0, out, 4, w, 34, 3, 2, act, 34, 1, 32) },
		"unknown type": func() { goSet.MatMul(quant.Type(99), out, 4, w, 34, 0, 4, act, 34, 1, 32) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: no panic", name)
				} else if !strings.HasPrefix(fmt.Sprint(r), "kernels: MatMul") {
					t.Errorf("%s: panic %q", name, r)
				}
			}()
			f()
		}()
	}
	// Empty ranges are no-ops, not errors.
	goSet.MatMul(quant.Q8_0, nil, 0, nil, 34, 2, 2, nil, 34, 1, 32)
	goSet.MatMul(quant.Q8_0, nil, 0, nil, 34, 0, 4, nil, 34, 0, 32)
}

// quantInputs are activation vectors that probe the quantizers' roundings:
// random scales, exact halves after scaling, zero blocks, a block whose
// largest magnitude appears with both signs, and single spikes.
func quantInputs(r *rand.Rand, k int) [][]float32 {
	var xs [][]float32
	for _, scale := range []float64{1, 1e-3, 100, 1e-6} {
		xs = append(xs, randFloats(r, k, scale))
	}
	halves := make([]float32, k)
	for i := range halves {
		halves[i] = float32(r.IntN(255)-127) / 2
	}
	for i := 0; i < k; i += 32 {
		halves[i] = 127 // amax 127: id = 1, so x*id keeps its .5
	}
	xs = append(xs, halves)
	zeros := randFloats(r, k, 1)
	clear(zeros[:256])
	xs = append(xs, zeros)
	ties := randFloats(r, k, 1)
	ties[3], ties[7] = -5, 5
	ties[40], ties[41] = 5, -5
	xs = append(xs, ties)
	spike := make([]float32, k)
	spike[k/2] = 3
	xs = append(xs, spike)
	return xs
}

func TestQuantizers(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const k = 256 * 5
	for xi, x := range quantInputs(r, k) {
		want08 := make([]byte, k/32*34)
		wantK := make([]byte, k/256*292)
		goSet.QuantizeQ8_0(want08, x)
		goSet.QuantizeQ8_K(wantK, x)
		// The Go reference itself must be the quant package's Q8_K.
		ref := make([]byte, len(wantK))
		if err := quant.QuantizeRow(quant.Q8_K, ref, x); err != nil || string(ref) != string(wantK) {
			t.Fatalf("input %d: goSet Q8_K differs from quant.QuantizeRow (%v)", xi, err)
		}
		for _, s := range sets(t) {
			got := make([]byte, len(want08)+5)
			s.QuantizeQ8_0(got, x)
			if i := firstDiff(got[:len(want08)], want08); i >= 0 {
				t.Errorf("%s: QuantizeQ8_0 input %d: byte %d (block %d) = %d, want %d", s.Name, xi, i, i/34, got[i], want08[i])
			}
			if got[len(want08)] != 0 {
				t.Errorf("%s: QuantizeQ8_0 wrote past its output", s.Name)
			}
			gotK := make([]byte, len(wantK))
			s.QuantizeQ8_K(gotK, x)
			if i := firstDiff(gotK, wantK); i >= 0 {
				t.Errorf("%s: QuantizeQ8_K input %d: byte %d (block %d) = %d, want %d", s.Name, xi, i, i/292, gotK[i], wantK[i])
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func TestToF16(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	// Random bit patterns cover subnormals, overflow, infinities and NaNs
	// with payloads; the scaled normals cover every rounding case of the
	// f16 range. 1001 values: not a multiple of any vector width.
	x := make([]float32, 1001)
	for i := range x {
		switch i % 3 {
		case 0:
			x[i] = math.Float32frombits(r.Uint32())
		case 1:
			x[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-25)))
		default:
			x[i] = math.Float32frombits(0x33000000 + r.Uint32()%0x0c000000) // 2^-25 .. 2^-1 region
		}
	}
	x[5], x[6] = 65519.99, 65520 // just below and at the rounding point to infinity
	for _, s := range sets(t) {
		got := make([]uint16, len(x))
		s.ToF16(got, x)
		for i, v := range x {
			if want := quant.F32ToF16(v); got[i] != want {
				t.Errorf("%s: ToF16(%g [%#x]) = %#x, want %#x", s.Name, v, math.Float32bits(v), got[i], want)
				break
			}
		}
	}
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, cols := range []int{768, 37, 8} {
		n := 3
		x := randFloats(r, n*cols, 3)
		wt := randFloats(r, cols, 1)
		want := make([]float32, n*cols)
		goSet.RMSNorm(want, x, wt, n, cols, 1e-5)
		for _, s := range sets(t) {
			got := make([]float32, n*cols)
			s.RMSNorm(got, x, wt, n, cols, 1e-5)
			// Only the order of the float64 sum of squares differs: the
			// float32 scale almost always comes out the same.
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Abs(float64(want[i])) {
					t.Errorf("%s: cols %d: out[%d] = %g, want %g", s.Name, cols, i, got[i], want[i])
					break
				}
			}
			inPlace := append([]float32(nil), x...)
			s.RMSNorm(inPlace, inPlace, wt, n, cols, 1e-5)
			for i := range got {
				if inPlace[i] != got[i] {
					t.Errorf("%s: in-place RMSNorm differs at %d", s.Name, i)
					break
				}
			}
		}
	}
}

func TestSiLUMul(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	gate := randFloats(r, 1003, 4)
	gate[0], gate[1], gate[2] = -100, 100, 0
	up := randFloats(r, 1003, 1)
	want := make([]float32, len(gate))
	goSet.SiLUMul(want, gate, up)
	for _, s := range sets(t) {
		got := make([]float32, len(gate))
		s.SiLUMul(got, gate, up)
		// exp may differ from the reference's by two float32 ulps; the
		// error that carries into g/(1+e)*up is below 1e-6 relative.
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Abs(float64(want[i]))+1e-37 {
				t.Errorf("%s: silu(%g)*%g = %g, want %g", s.Name, gate[i], up[i], got[i], want[i])
				break
			}
		}
	}
}

// TestActivations checks every level's activation forms against the
// reference's bytes (Q8_0 and Q8_K as ggml's SIMD quantizers round, f16,
// bf16) and that float32 activations are x's own bytes.
func TestActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	x := randFloats(r, 3*256, 2)
	for _, k := range table {
		wt := k.t
		want := append([]byte(nil), goSet.Activations(wt, make([]byte, ActivationBytes(wt, len(x))), x)...)
		if len(want) != ActivationBytes(wt, len(x)) {
			t.Fatalf("%v: %d bytes, ActivationBytes says %d", wt, len(want), ActivationBytes(wt, len(x)))
		}
		for _, s := range sets(t) {
			got := s.Activations(wt, make([]byte, len(want)), x)
			if !slices.Equal(got, want) {
				t.Errorf("%s %v: activations differ from the reference's", s.Name, wt)
			}
		}
	}
	if f := goSet.Activations(quant.F32, nil, x); unsafe.SliceData(f) != (*byte)(unsafe.Pointer(unsafe.SliceData(x))) {
		t.Error("float32 activations were copied")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Activations") {
			t.Errorf("a short dst: recovered %v, want an Activations panic", r)
		}
	}()
	goSet.Activations(quant.Q8_0, make([]byte, 10), x)
}

// TestRoPE checks every level against the reference bit for bit, both pair
// layouts, whole and partial rotation, on odd shapes.
func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, hd := range []int{2, 6, 34, 64, 80, 128} {
		for _, pairs := range []int{hd / 2, hd / 4, 1} {
			for _, neox := range []bool{false, true} {
				const heads = 3
				x := randFloats(r, heads*hd, 3)
				cos, sin := make([]float32, pairs), make([]float32, pairs)
				for j := range cos {
					a := r.Float64() * 100
					cos[j], sin[j] = float32(math.Cos(a)), float32(math.Sin(a))
				}
				want := append([]float32(nil), x...)
				goSet.RoPE(want, heads, hd, pairs, neox, cos, sin)
				if slices.Equal(want, x) && pairs > 0 {
					t.Fatalf("hd=%d pairs=%d: the reference left x as it was", hd, pairs)
				}
				for _, s := range sets(t) {
					got := append([]float32(nil), x...)
					s.RoPE(got, heads, hd, pairs, neox, cos, sin)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s hd=%d pairs=%d neox=%v: x[%d] = %g, want %g", s.Name, hd, pairs, neox, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	for name, f := range map[string]func(){
		"pairs > hd/2": func() { goSet.RoPE(make([]float32, 8), 1, 8, 5, false, make([]float32, 5), make([]float32, 5)) },
		"short cos":    func() { goSet.RoPE(make([]float32, 8), 1, 8, 4, false, make([]float32, 3), make([]float32, 4)) },
		"short x":      func() { goSet.RoPE(make([]float32, 15), 2, 8, 4, false, make([]float32, 4), make([]float32, 4)) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "RoPE") {
					t.Errorf("%s: recovered %v, want a RoPE panic", name, r)
				}
			}()
			f()
		}()
	}
}

// treeMask returns an n×n ancestor mask of a random token tree: row j
// attends to new row i iff i is j or one of its ancestors.
// randKV returns a K and a V cache of size f16 values of a standard normal.
func randKV(r *rand.Rand, size int) (kc, vc []uint16) {
	kc, vc = make([]uint16, size), make([]uint16, size)
	for i := range kc {
		kc[i] = quant.F32ToF16(float32(r.NormFloat64()))
		vc[i] = quant.F32ToF16(float32(r.NormFloat64()))
	}
	return kc, vc
}

// withSweeps runs f with s's attention sweeping its keys and values first
// (see attentionSweep) never and always, where s's attention sweeps at all,
// and leaves the default after.
func withSweeps(s *Set, f func(sweep int64)) {
	if s.attentionSweep == nil {
		f(0)
		return
	}
	defer s.attentionSweep(attentionSweep())
	for _, sweep := range []int64{0, 1 << 40} {
		s.attentionSweep(sweep)
		f(sweep)
	}
}

// guardedHalves is src copied into memory that ends where an inaccessible
// page begins (see guarded): a kernel that reads past the cache faults.
func guardedHalves(t testing.TB, src []uint16) []uint16 {
	b := guarded(t, 2*len(src))
	h := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(src))
	copy(h, src)
	return h
}

func treeMask(r *rand.Rand, n int) []uint8 {
	parent := make([]int, n)
	mask := make([]uint8, n*n)
	for j := range n {
		parent[j] = r.IntN(j+1) - 1 // -1: a child of the committed sequence
		mask[j*n+j] = 1
		for a := parent[j]; a >= 0; a = parent[a] {
			mask[j*n+a] = 1
		}
	}
	return mask
}

func TestAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, past := range []int{0, 1, 5, 33} {
		for _, n := range []int{1, 3, 16} {
			for _, shape := range [][3]int{{8, 2, 16}, {8, 4, 64}, {8, 2, 64}, {4, 4, 72}, {8, 2, 36}, {12, 12, 64}, {6, 6, 36}} {
				heads, kvHeads, hd := shape[0], shape[1], shape[2]
				name := fmt.Sprintf("past=%d/n=%d/heads=%d/kv=%d/hd=%d", past, n, heads, kvHeads, hd)
				T := past + n
				kc, vc := randKV(r, T*kvHeads*hd)
				kc, vc = guardedHalves(t, kc), guardedHalves(t, vc)
				q := randFloats(r, n*heads*hd, 1)
				mask := treeMask(r, n)
				scale := float32(1 / math.Sqrt(float64(hd)))
				jlo, jhi := 0, n
				if n > 2 {
					jlo, jhi = 1, n-1 // the caller's split: other rows untouched
				}
				want := make([]float32, n*heads*hd)
				for i := range want {
					want[i] = sentinel
				}
				goSet.Attention(want, q, kc, vc, past, n, mask, heads, kvHeads, hd, scale, jlo, jhi, make([]float32, AttentionScratch(past, n)))
				for _, s := range sets(t) {
					withSweeps(s, func(sweep int64) {
						got := make([]float32, len(want))
						for i := range got {
							got[i] = sentinel
						}
						s.Attention(got, q, kc, vc, past, n, mask, heads, kvHeads, hd, scale, jlo, jhi, make([]float32, AttentionScratch(past, n)))
						compareAttention(t, fmt.Sprintf("%s/sweep=%d/%s", s.Name, sweep, name), got, want, vc, past, n, mask, heads, kvHeads, hd, jlo, jhi)
					})
				}
			}
		}
	}
}

// TestAttentionRowsAlone checks that a row's attention is the same bits
// whether it is computed with other rows of its tree (the kernels take rows
// AttentionRows at a time) or alone, as decoding it would: greedy
// speculative decoding is lossless only if verification scores a node
// exactly as a decode step would.
func TestAttentionRowsAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	// past, n, head dimension, heads, KV heads: grouped-query shapes, and
	// multi-head ones (a decode row's heads four at a time, each with
	// keys and values of its own), one with a tail; 8 heads over 4 KV
	// heads put two KV heads in every four heads.
	for _, shape := range [][5]int{{37, 11, 40, 6, 2}, {8, 9, 72, 4, 2}, {0, 16, 64, 8, 2}, {301, 16, 64, 8, 2}, {37, 11, 36, 8, 2},
		{37, 11, 64, 12, 12}, {9, 16, 36, 6, 6}, {41, 5, 40, 8, 4}} {
		past, n, hd, heads, kvHeads := shape[0], shape[1], shape[2], shape[3], shape[4]
		T := past + n
		kc, vc := randKV(r, T*kvHeads*hd)
		q := randFloats(r, n*heads*hd, 1)
		mask := treeMask(r, n)
		for _, s := range sets(t) {
			all := make([]float32, n*heads*hd)
			s.Attention(all, q, kc, vc, past, n, mask, heads, kvHeads, hd, 0.15, 0, n, make([]float32, AttentionScratch(past, n)))
			withSweeps(s, func(sweep int64) {
				for j := 0; j < n; j++ {
					one := make([]float32, n*heads*hd)
					s.Attention(one, q, kc, vc, past, n, mask, heads, kvHeads, hd, 0.15, j, j+1, make([]float32, AttentionScratch(past, n)))
					for i := j * heads * hd; i < (j+1)*heads*hd; i++ {
						if math.Float32bits(one[i]) != math.Float32bits(all[i]) {
							t.Fatalf("%s sweep=%d past=%d n=%d hd=%d: row %d alone gives out[%d] = %g, with the others %g", s.Name, sweep, past, n, hd, j, i, one[i], all[i])
						}
					}
				}
			})
		}
	}
}

// compareAttention compares outputs. A score that differs in its last bit
// (the q·k sums run in another order, exp differs by an ulp) can round its
// f16 weight the other way, a relative change of 2^-11 in that weight; so
// each output may differ by 2^-11 of the largest |v| it averages, and by
// 1e-3 of it allowing for several such flips.
func compareAttention(t *testing.T, name string, got, want []float32, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd, jlo, jhi int) {
	group := heads / kvHeads
	for j := range n {
		for h := range heads {
			for d := range hd {
				i := j*heads*hd + h*hd + d
				if j < jlo || j >= jhi {
					if got[i] != sentinel {
						t.Errorf("%s: wrote row %d outside [%d, %d)", name, j, jlo, jhi)
						return
					}
					continue
				}
				var vmax float64
				for tpos := range past + n {
					if tpos >= past && mask[j*n+tpos-past] == 0 {
						continue
					}
					v := math.Abs(float64(quant.F16ToF32(vc[tpos*kvHeads*hd+(h/group)*hd+d])))
					vmax = max(vmax, v)
				}
				if diff := math.Abs(float64(got[i] - want[i])); !(diff <= 1e-3*vmax) {
					t.Errorf("%s: out[row %d, head %d, dim %d] = %g, want %g", name, j, h, d, got[i], want[i])
					return
				}
			}
		}
	}
}

func TestAttentionChecks(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "attend to itself") {
			t.Errorf("mask without its diagonal: panic %v", r)
		}
	}()
	goSet.Attention(make([]float32, 4), make([]float32, 4), make([]uint16, 4), make([]uint16, 4), 0, 1, []uint8{0}, 1, 1, 4, 1, 0, 1, make([]float32, 1))
}

// StreamRead sums the same words at every level as the Go reference, for
// lengths that leave every remainder of its unrolled loops.
func TestStreamRead(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range sets(t) {
		for _, n := range []int{0, 64, 128, 192, 256, 320, 4096 + 192, 1 << 20} {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			if got, want := s.StreamRead(b), refStreamRead(b); got != want {
				t.Errorf("%s: %d bytes: sum %#x, want %#x", s.Name, n, got, want)
			}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: 100 bytes read without a panic", s.Name)
				}
			}()
			s.StreamRead(make([]byte, 100))
		}()
	}
}
