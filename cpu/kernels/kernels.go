// Package kernels holds the compute kernels of the CPU forward pass: matrix
// products over weights in their GGUF block formats, the activation
// quantizers those products need, RMS norm, SwiGLU and attention over an f16
// KV cache.
//
// Every kernel exists at several levels. "go" is pure Go: the reference the
// others are tested against, and the fallback when nothing else can run. The
// other levels are C (c/*.c) compiled by `make kernels` once per ISA level
// into shared libraries: "generic" (plain C for the baseline ISA), "avx2"
// (x86-64-v3), "avxvnni" (x86-64-v3 with AVX-VNNI's ymm vpdpbusd: Intel's
// client cores since Alder Lake, which lack AVX-512), "avx512" (x86-64-v4
// with AVX512-VNNI; AVX-VNNI is not required, since its ymm vpdpbusd adds
// nothing where AVX512-VNNI exists and requiring it would exclude Zen 4 and
// Ice Lake) and "neon" (arm64 with the dot-product extension). "amx" is the avx512 library with AMX tiles
// multiplying batches of 8 or more activation rows of packed Q8_0 and Q4_0
// weights (see Packed); it needs the CPU's AMX-INT8 and the OS's consent
// (arch_prctl), and gives the same results bit for bit. The libraries are embedded in the Go binary,
// written on first use to the user's cache directory under a
// content-addressed name, and opened with purego, so the binary needs
// neither cgo nor files beside it. Best picks the highest level the CPU
// supports; DOVETAIL_KERNELS=name forces one. A plain `go build` without
// `make` embeds no library and runs in Go.
//
// The levels are interchangeable: integer parts of the quantized products are
// exact at every level, so results differ only in the order of float32
// additions (see the tests for the bound), and the quantizers agree byte for
// byte.
//
// For the caller (the forward pass):
//   - Sets are immutable and safe for concurrent use. Every kernel is
//     single-threaded and writes only its own outputs, so workers can run
//     disjoint row ranges of one MatMul, or disjoint query rows of one
//     Attention, at the same time.
//   - A call into C through purego costs several times a cgo call's
//     (docs/measurements/kernels-attention-threads.md, "Calls into C"),
//     so give each worker one call per matrix (a row range [lo, hi)), and
//     pass RMSNorm all rows at once.
//   - No alignment and no padding is needed anywhere: kernels use unaligned
//     loads and never read past the end of a weight row or activation row
//     (tested with data placed just before an unmapped page). Strides may be
//     any size at least a row.
//   - Activations must come from QuantizeQ8_0 / QuantizeQ8_K (or equal
//     bytes): the Q8_0 kernels rely on quants in [-127, 127].
//   - MatMul with n activation rows reads the weights once: weight rows are
//     tiled (16 at AVX-512, 4 at NEON) against up to 16 activation rows held
//     in registers. Give a worker at least 16 consecutive rows (lo, hi) so
//     that its tiles are full.
//
// Deviations from a straight "one function per kernel" API, and why:
//   - MatMul takes the weight type and dispatches on it, because the forward
//     pass holds tensors of mixed types. Every type quant reads has a C
//     kernel; a type without one (native says which) would be accepted with
//     F32 activations and run in Go at every level: a correct slow path
//     beats a missing one.
//   - Arguments are validated in Go before any C code runs, and a violated
//     precondition panics: a shape error is a bug in the caller, and letting
//     it reach C would turn it into memory corruption.
//   - Attention supports head dimensions up to MaxHeadDim, so that the C side
//     can keep the f16-rounded query on its stack.
//
// README.md is a guide to the C side: its files, tiles and packed layouts,
// the thread pool, and how to add a kernel (one line of the kernel table,
// table.go).
package kernels

import (
	"fmt"
	"unsafe"

	"dovetail/quant"
)

// MaxHeadDim is the largest head dimension Attention accepts.
const MaxHeadDim = 1024

// AttentionRows is how many query rows Attention computes together (a
// tree's rows share the committed keys and values); its scratch holds that
// many rows of scores.
const AttentionRows = 4

// AttentionScratch is the scratch, in floats, that Attention needs for past
// committed positions and n new rows.
func AttentionScratch(past, n int) int { return AttentionRows * (past + n) }

// Set is one implementation of every kernel. All functions are
// single-threaded; the caller splits work across its own worker pool.
type Set struct {
	// Name is the level: "go", "generic", "avx2", "avxvnni", "avx512", "amx"
	// or "neon".
	Name string
	// Build identifies the code: a hash of the level's library ("go" for
	// the pure-Go set), so that what was measured with one build (a
	// planner's profile) is not reused with another.
	Build string

	// QuantizeQ8_0 quantizes len(x) values (a multiple of 32) into
	// len(x)/32*34 bytes of dst the way ggml's SIMD quantize_row_q8_0 does:
	// d = amax/127 stored as f16, id = 127/amax (0 if amax is 0), q =
	// round-half-to-even(x*id). These are the activations of Q8_0 and Q4_0
	// weights.
	QuantizeQ8_0 func(dst []byte, x []float32)
	// QuantizeQ8_K quantizes len(x) values (a multiple of 256) into
	// len(x)/256*292 bytes of dst as ggml's quantize_row_q8_K_ref does (the
	// same bytes as quant.QuantizeRow(quant.Q8_K, ...)). These are the
	// activations of the k-quants' (Q2_K to Q6_K) and IQ4_XS weights.
	QuantizeQ8_K func(dst []byte, x []float32)
	// ToF16 rounds x to f16 (nearest even; NaNs become ggml's 0x7e00 with
	// their sign), as quant.F32ToF16 does. These are the activations of F16
	// weights.
	ToF16 func(dst []uint16, x []float32)

	// MatMul computes, for weight rows r in [lo, hi) and activation rows j in
	// [0, n), out[j*ldo + r] = dot(weight row r, activation row j). Weight row
	// r is the cols values of type t at w[r*rowBytes:]; activation row j is at
	// act[j*actRowBytes:] in the form ActivationType(t) gives (use Bytes to
	// view []float32 or []uint16 activations as bytes). The weights are read
	// once per call whatever n is, so verifying n tokens costs little more
	// than decoding one.
	MatMul func(t quant.Type, out []float32, ldo int, w []byte, rowBytes int, lo, hi int, act []byte, actRowBytes int, n int, cols int)

	// PackRows is the row group of this level's packed layout (16 at
	// AVX-512, 8 at AVX2 and AVX-VNNI), 0 where nothing is packed.
	PackRows int
	// Pack copies rows [0, rows) of a matrix (MatMul's w and rowBytes) into
	// this level's packed layout, or returns nil if the level multiplies
	// type t from the GGUF layout; then use MatMul. The types the kernel
	// table marks packed (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K to
	// Q6_K, IQ4_XS, F16 and BF16; rows of whole blocks of 32) pack at
	// AVX-512 and AVX2.
	Pack func(t quant.Type, w []byte, rowBytes, rows, cols int) *Packed
	// PackEach is Pack calling done(lo, hi) as soon as rows [lo, hi) of w
	// are packed (a few MB at a time), so that a caller can release those
	// rows while the rest are copied.
	PackEach func(t quant.Type, w []byte, rowBytes, rows, cols int, done func(lo, hi int)) *Packed
	// MatMulPacked is MatMul over a packed matrix: the same results, bit
	// for bit the same whatever n is. lo must be a multiple of PackRows and
	// hi a multiple of it or p.Rows, so split work between workers by
	// groups of PackRows rows.
	MatMulPacked func(out []float32, ldo int, p *Packed, lo, hi int, act []byte, actRowBytes, n int)
	// NewThreads starts n-1 C threads for whole packed products (see
	// Threads), or returns nil where the level has none (or n < 2).
	NewThreads func(n int) *Threads

	// RMSNorm normalizes each of the n rows of cols values of x into out:
	// out = x / sqrt(mean(x²) + eps) * weight, the sum of squares in float64
	// as ggml does. out may be x.
	RMSNorm func(out, x, weight []float32, n, cols int, eps float32)
	// SiLUMul sets out = silu(gate) * up elementwise. out may alias either.
	SiLUMul func(out, gate, up []float32)
	// RoPE rotates, in place, heads rows of hd values of x: pair j (values
	// 2j and 2j+1, or with neox j and j+pairs) by the angle whose cosine
	// and sine are cos[j] and sin[j], for j < pairs <= hd/2. Every level
	// gives the same bits: x0*c - x1*s and x0*s + x1*c, each product
	// rounded.
	RoPE func(x []float32, heads, hd, pairs int, neox bool, cos, sin []float32)

	// Attention computes query rows j in [jlo, jhi) of tree attention over
	// one layer's f16 KV cache. q holds n rows of heads*hd float32 (already
	// rotated); kc and vc hold positions × kvHeads*hd f16 values with the n
	// new rows already written at positions past..past+n-1. Row j attends to
	// positions [0, past) and to past+i iff mask[j*n+i] != 0 (mask[j*n+j]
	// must be 1). Head h reads KV head h/(heads/kvHeads). The arithmetic is
	// llama.cpp's non-flash attention: scores = dot(f16(q), k)*scale, softmax
	// in float32, weights rounded to f16, out[j*heads*hd + h*hd + d] = sum of
	// w_t*v_t[d]. scratch must hold AttentionScratch(past, n) floats;
	// nothing allocates.
	Attention func(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32)

	// StreamRead reads b (its length a multiple of 64) as fast as this
	// level's loads stream memory, as decoding reads weights, and returns
	// the wrapping sum of its little-endian 64-bit words, the same at every
	// level (see cpu.Fast.MeasureWeightRead).
	StreamRead func(b []byte) uint64

	// scratchless makes the single-thread packed products over Q8_0
	// activations take their path for when no scratch memory can be had
	// (nil where nothing packs); for the tests.
	scratchless func(on bool)
	// attentionSweep sets how many bytes of the keys and values attention
	// may sweep first (nil where it does not); for the tests.
	attentionSweep func(bytes int64)
}

// impl is a level's kernels before argument checking; newSet wraps it so
// that every level validates the same way and C only sees valid arguments.
type impl struct {
	quantizeQ8_0 func(dst []byte, x []float32)
	quantizeQ8_K func(dst []byte, x []float32)
	toF16        func(dst []uint16, x []float32)
	// matmul handles the types for which native reports true; the others
	// go to the Go reference.
	matmul     func(t quant.Type, out []float32, ldo int, w []byte, rowBytes, lo, hi int, act []byte, actRowBytes, n, cols int)
	rmsnorm    func(out, x, weight []float32, n, cols int, eps float32)
	siluMul    func(out, gate, up []float32)
	rope       func(x []float32, heads, hd, pairs int, neox bool, cos, sin []float32)
	attention  func(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32)
	streamRead func(b []byte) uint64
	packing    packImpl
	// attentionSweep sets the bytes attention may sweep (see
	// attentionSweep); nil where attention does not.
	attentionSweep func(bytes int64)
}

// ActivationBytes is the size in bytes of n activation values (whole rows
// of whole blocks) in the form ActivationType(t).
func ActivationBytes(t quant.Type, n int) int {
	switch f := ActivationType(t); f {
	case quant.Q8_0:
		return n / quant.QK * quant.Q8_0.TypeSize()
	case quant.Q8_K:
		return n / quant.QKK * quant.Q8_K.TypeSize()
	case quant.F16, quant.BF16:
		return 2 * n
	}
	return 4 * n
}

// Activations puts x (whole rows) in the form MatMul multiplies weights of
// type t by, ActivationType(t), quantized as the target quantizes its own,
// and returns those bytes: dst[:ActivationBytes(t, len(x))], or for float32
// x's own bytes (dst is then not used).
func (s *Set) Activations(t quant.Type, dst []byte, x []float32) []byte {
	f := ActivationType(t)
	if f == quant.F32 {
		return Bytes(x)
	}
	need := ActivationBytes(t, len(x))
	if len(dst) < need {
		panic(fmt.Sprintf("kernels: Activations: %d values as %v need %d bytes of dst, have %d", len(x), f, need, len(dst)))
	}
	dst = dst[:need]
	switch f {
	case quant.Q8_0:
		s.QuantizeQ8_0(dst, x)
	case quant.Q8_K:
		s.QuantizeQ8_K(dst, x)
	default:
		h := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), len(x))
		if f == quant.F16 {
			s.ToF16(h, x)
		} else {
			for i, v := range x {
				h[i] = quant.F32ToBF16(v)
			}
		}
	}
	return dst
}

// Bytes views a float32 or uint16 slice as its bytes (no copy), for MatMul's
// f32, f16 and bf16 activations.
func Bytes[T float32 | uint16](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*int(unsafe.Sizeof(x[0])))
}

// maxRowBytes bounds rowBytes so that the C kernels can hold the offsets of
// sixteen rows in 32-bit gather indices.
const maxRowBytes = 1 << 26

func newSet(name string, im impl) *Set {
	s := &Set{Name: name, Build: name}
	s.QuantizeQ8_0 = func(dst []byte, x []float32) {
		need := checkQuant("QuantizeQ8_0", quant.Q8_0, len(dst), len(x))
		if need > 0 {
			im.quantizeQ8_0(dst[:need], x)
		}
	}
	s.QuantizeQ8_K = func(dst []byte, x []float32) {
		need := checkQuant("QuantizeQ8_K", quant.Q8_K, len(dst), len(x))
		if need > 0 {
			im.quantizeQ8_K(dst[:need], x)
		}
	}
	s.ToF16 = func(dst []uint16, x []float32) {
		if len(dst) < len(x) {
			panic(fmt.Sprintf("kernels: ToF16: dst holds %d values, x has %d", len(dst), len(x)))
		}
		if len(x) > 0 {
			im.toF16(dst[:len(x)], x)
		}
	}
	s.MatMul = func(t quant.Type, out []float32, ldo int, w []byte, rowBytes, lo, hi int, act []byte, actRowBytes, n, cols int) {
		if !checkMatMul(t, out, ldo, w, rowBytes, lo, hi, act, actRowBytes, n, cols) {
			return
		}
		if native(t) {
			im.matmul(t, out, ldo, w, rowBytes, lo, hi, act, actRowBytes, n, cols)
		} else {
			refMatMul(t, out, ldo, w, rowBytes, lo, hi, act, actRowBytes, n, cols)
		}
	}
	s.RMSNorm = func(out, x, weight []float32, n, cols int, eps float32) {
		if n < 0 || cols < 0 || len(x) < n*cols || len(out) < n*cols || len(weight) < cols {
			panic(fmt.Sprintf("kernels: RMSNorm: %d rows of %d values need len(x), len(out) >= %d and len(weight) >= %d; have %d, %d, %d",
				n, cols, n*cols, cols, len(x), len(out), len(weight)))
		}
		if n > 0 && cols > 0 {
			im.rmsnorm(out, x, weight, n, cols, eps)
		}
	}
	s.SiLUMul = func(out, gate, up []float32) {
		if len(up) < len(gate) || len(out) < len(gate) {
			panic(fmt.Sprintf("kernels: SiLUMul: gate has %d values, up %d, out %d", len(gate), len(up), len(out)))
		}
		if len(gate) > 0 {
			im.siluMul(out, gate, up[:len(gate)])
		}
	}
	s.RoPE = func(x []float32, heads, hd, pairs int, neox bool, cos, sin []float32) {
		if heads < 0 || hd < 0 || pairs < 0 || 2*pairs > hd || len(x) < heads*hd || len(cos) < pairs || len(sin) < pairs {
			panic(fmt.Sprintf("kernels: RoPE: %d heads of %d values, %d pairs: x has %d values, cos %d, sin %d", heads, hd, pairs, len(x), len(cos), len(sin)))
		}
		if heads > 0 && pairs > 0 {
			im.rope(x, heads, hd, pairs, neox, cos, sin)
		}
	}
	s.Attention = func(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32) {
		checkAttention(out, q, kc, vc, past, n, mask, heads, kvHeads, hd, jlo, jhi, scratch)
		if jhi > jlo {
			im.attention(out, q, kc, vc, past, n, mask, heads, kvHeads, hd, scale, jlo, jhi, scratch)
		}
	}
	s.StreamRead = func(b []byte) uint64 {
		if len(b)%64 != 0 {
			panic(fmt.Sprintf("kernels: StreamRead: %d bytes, not a multiple of 64", len(b)))
		}
		if len(b) == 0 {
			return 0
		}
		return im.streamRead(b)
	}
	s.setPacking(im.packing)
	s.attentionSweep = im.attentionSweep
	return s
}

// checkQuant validates a quantizer call and returns the bytes it writes.
func checkQuant(op string, t quant.Type, ndst, nx int) int {
	need, err := t.RowSize(nx)
	if err != nil {
		panic(fmt.Sprintf("kernels: %s: %v", op, err))
	}
	if ndst < need {
		panic(fmt.Sprintf("kernels: %s: %d values need %d bytes of dst, have %d", op, nx, need, ndst))
	}
	return need
}

// checkMatMul panics on arguments that would read or write out of bounds and
// reports whether there is any work.
func checkMatMul(t quant.Type, out []float32, ldo int, w []byte, rowBytes, lo, hi int, act []byte, actRowBytes, n, cols int) bool {
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("kernels: MatMul %v: ", t) + fmt.Sprintf(format, args...))
	}
	if !native(t) && !quant.CanDequantize(t) {
		fail("unsupported weight type")
	}
	wsz, err := t.RowSize(cols)
	if err != nil {
		fail("%v", err)
	}
	asz, _ := ActivationType(t).RowSize(cols)
	if lo < 0 || hi < lo || n < 0 {
		fail("bad ranges: rows [%d, %d), %d activation rows", lo, hi, n)
	}
	if hi == lo || n == 0 || cols == 0 {
		return false
	}
	if rowBytes < wsz || rowBytes > maxRowBytes {
		fail("rowBytes %d: a row of %d values takes %d bytes (and at most %d are supported)", rowBytes, cols, wsz, maxRowBytes)
	}
	if need := (hi-1)*rowBytes + wsz; len(w) < need {
		fail("rows [%d, %d) need %d bytes of w, have %d", lo, hi, need, len(w))
	}
	if actRowBytes < asz {
		fail("actRowBytes %d: an activation row of %d values takes %d bytes", actRowBytes, cols, asz)
	}
	if need := (n-1)*actRowBytes + asz; len(act) < need {
		fail("%d activation rows need %d bytes of act, have %d", n, need, len(act))
	}
	if n > 1 && ldo < hi {
		fail("ldo %d < hi %d: output rows would overlap", ldo, hi)
	}
	if need := (n-1)*ldo + hi; len(out) < need {
		fail("%d output rows need %d values of out, have %d", n, need, len(out))
	}
	return true
}

func checkAttention(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd, jlo, jhi int, scratch []float32) {
	fail := func(format string, args ...any) {
		panic("kernels: Attention: " + fmt.Sprintf(format, args...))
	}
	if past < 0 || n < 1 || jlo < 0 || jhi < jlo || jhi > n {
		fail("bad ranges: past %d, n %d, rows [%d, %d)", past, n, jlo, jhi)
	}
	if heads < 1 || kvHeads < 1 || heads%kvHeads != 0 || hd < 1 || hd > MaxHeadDim {
		fail("bad shape: %d heads, %d KV heads, head dimension %d (at most %d)", heads, kvHeads, hd, MaxHeadDim)
	}
	if len(mask) < n*n {
		fail("mask has %d entries, need %d", len(mask), n*n)
	}
	for j := jlo; j < jhi; j++ {
		if mask[j*n+j] == 0 {
			fail("mask[%d] is 0: a row must attend to itself", j*n+j)
		}
	}
	kv := (past + n) * kvHeads * hd
	if len(kc) < kv || len(vc) < kv {
		fail("%d positions of %d KV values need %d cache entries, have %d and %d", past+n, kvHeads*hd, kv, len(kc), len(vc))
	}
	if len(q) < n*heads*hd || len(out) < n*heads*hd {
		fail("%d rows of %d values need len(q), len(out) >= %d; have %d, %d", n, heads*hd, n*heads*hd, len(q), len(out))
	}
	if len(scratch) < AttentionScratch(past, n) {
		fail("scratch holds %d floats, need %d", len(scratch), AttentionScratch(past, n))
	}
}
