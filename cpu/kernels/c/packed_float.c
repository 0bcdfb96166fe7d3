// Packed F16 and BF16 weights: rows in the level's groups (16 at AVX-512,
// 8 at AVX2, the last padded with zero rows), each group's blocks of 16
// columns one after another, a block the group's rows one after another:
//
//	block k: row 0's values 16k..16k+15, row 1's, ... (32 bytes a row)
//
// the file's bytes in another order (BF16: blocks of 32 columns, 64 bytes
// a row, below). A product streams one run of memory
// a group, as the quantized types' packed products do (a small model's
// rows in the GGUF layout were streams too short for the hardware
// prefetchers).
//
// A row's sum is kept in 16 lanes, lane l summing columns 16k+l with one
// FMA chain over the blocks in order, then reduced in a fixed tree
// (pf_reduce): the arithmetic of the row kernels' AVX-512 tiles, so the
// results are as close to llama.cpp's. AVX2 keeps the 16 lanes in two ymm
// and reduces them in the same tree, so both levels give the same bits,
// for any number of activation rows: a tree's verification scores each
// node bit for bit as decoding it alone does. Decoding (one activation
// row) takes a group's rows at once, their chains overlapping; several
// activation rows go in tiles of PF_RT weight rows by up to PF_NT
// activation rows, a piece of PF_KC blocks at a time for the whole group,
// so that a piece of the activations stays in L1. The activations come
// widened to float32 (widen.h).
//
// BF16 sums as vdpbf16ps does (AVX512_BF16, which llama.cpp's BF16 dot
// takes too): lane l of a row sums the pairs of columns 32k+2l and
// 32k+2l+1, block after block, each pair as two FMAs, the odd column's
// first (the products of two bf16 are exact in float32, so this is the
// instruction's arithmetic; measured equal on Zen 5 over 3.2M random
// lanes). Where the CPU has AVX512_BF16 one instruction does a block's
// 32 columns of a row; elsewhere the weights' u32 pairs split into two
// floats by a mask and a shift and the activations come split likewise,
// so every level gives the same bits (but for subnormal values, below
// 1.2e-38, which vdpbf16ps takes as zero).
#include "common.h"
#include "widen.h"

// PF_RT weight rows and up to PF_NT activation rows make a tile.
#if defined(DT_AVX512)
#define PF_ROWS 16
#define PF_RT 4
#define PF_NT 6
#elif defined(DT_AVX2)
#define PF_ROWS 8
#define PF_RT 1
#define PF_NT 6
#endif
#define PF_LANES (PF_NT * 16) // floats of a weight row's lanes against a tile's activation rows
#define PF_AHEAD 2048           // bytes of a group's stream prefetched ahead
#define PF_KC 16                // blocks a piece (a tile's activation rows: 6 KB)
#define PB_KC 8                 // BF16 blocks a piece: the same columns
#if defined(DT_AVX512)
#define PF_TILES_2 pf_tiles_2
#define PF_ROWS_2 pf_rows_2
#else
#define PF_TILES_2 pf_tiles_1 // no vdpbf16ps below AVX-512: never chosen
#define PF_ROWS_2 pf_rows_1
#endif

#if defined(PF_ROWS)

// pf_pack packs rows [0, rows) of an F16 matrix (rb bytes apart, cols a
// multiple of 16) in blocks of 16 columns, or of a BF16 one in blocks of
// 32 (bs: a row's bytes in a block, 32 or 64).
static void pf_pack(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols, int64_t bs) {
	const int64_t groups = (rows + PF_ROWS - 1) / PF_ROWS, nk = 2 * cols / bs;
	for (int64_t g = 0; g < groups; g++)
		for (int64_t k = 0; k < nk; k++) {
			uint8_t *d = dst + (g * nk + k) * PF_ROWS * bs;
			for (int i = 0; i < PF_ROWS; i++) {
				const int64_t r = g * PF_ROWS + i;
				if (r < rows)
					memcpy(d + bs * i, w + r * rb + bs * k, bs);
				else
					memset(d + bs * i, 0, bs);
			}
		}
}



// pf_reduce sums lanes 0..7 and 8..15 of a row's 16 (lo, hi) in the
// tree both levels take.
DT_INLINE float pf_reduce(__m256 lo, __m256 hi) {
	const __m256 v8 = _mm256_add_ps(lo, hi);
	const __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
	const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
	return _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
}

// pb_split returns the n BF16 activation rows at act (arb bytes apart) in
// act_rows's buffer (as widen_rows, *xs floats apart), each block
// of 32 columns as its 16 odd columns then its 16 even ones, in float32:
// the pairs' halves the weights split into. With hw the rows stay bf16
// (vdpbf16ps takes them so), copied to the buffer's row placement.
__attribute__((unused)) static float *pb_split(int hw, const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t *xs) {
	float *buf = act_rows(n, cols, xs);
	if (!buf) return 0;
	const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000);
	for (int64_t j = 0; j < n; j++) {
		const uint8_t *a = act + j * arb;
		float *x = buf + j * *xs;
		if (hw) {
			memcpy(x, a, (size_t)(2 * cols));
			continue;
		}
		for (int64_t c = 0; c < cols; c += 32)
			for (int h = 0; h < 2; h++) {
				const __m256i v = _mm256_loadu_si256((const __m256i *)(a + 2 * c + 32 * h));
				_mm256_storeu_ps(x + c + 8 * h, _mm256_castsi256_ps(_mm256_and_si256(v, hi16)));
				_mm256_storeu_ps(x + c + 16 + 8 * h, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
			}
	}
	return buf;
}

// The kinds of block the tiles multiply: KIND 0 F16 (16 columns a row,
// 32 bytes; the activations 16 floats a block), 1 BF16 with the
// activations split (32 columns, 64 bytes; 32 floats a block: the odd
// columns, then the even), 2 BF16 with vdpbf16ps (the activations bf16,
// 16 floats' room a block).
#define PF_RB(KIND) ((KIND) ? 64 : 32)         // a row's bytes in a block
#define PF_XB(KIND) ((KIND) == 1 ? 32 : 16)    // the activations' floats a block
#define PF_BB(KIND) (PF_ROWS * PF_RB(KIND))    // a group's bytes in a block

#if defined(DT_AVX512)

DT_INLINE float pf_sum(__m512 v) { return pf_reduce(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }

// pf_reduce16 is pf_reduce of 16 rows' lanes at once (row i's at l + i*ls),
// the same additions transposed, the sums stored to out[0..rows): lanes
// l+8, then 4, 2 and 1 apart, as pf_reduce adds them.
DT_INLINE void pf_reduce16(const float *l, int64_t ls, float *out, int rows) {
	__m512 a[16], b[8], c[4], d[2];
	#pragma GCC unroll 16
	for (int i = 0; i < 16; i++) a[i] = _mm512_loadu_ps(l + i * ls);
	// b[i]: rows 2i (low half) and 2i+1, eight lanes each.
	#pragma GCC unroll 8
	for (int i = 0; i < 8; i++)
		b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44), _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
	// c[i]: rows 4i..4i+3, four lanes each.
	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88), _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));
	// d[i]: per 128 bits, two lanes of a row of c[2i] then of c[2i+1].
	#pragma GCC unroll 2
	for (int i = 0; i < 2; i++) {
		const __m512d x = _mm512_castps_pd(c[2 * i]), y = _mm512_castps_pd(c[2 * i + 1]);
		d[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
	}
	// Per 128 bits k: rows 4·0+k, 4·1+k (from d[0]), 4·2+k, 4·3+k (d[1]).
	const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xdd));
	const __m512 v = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e);
	_mm512_mask_storeu_ps(out, rows == 16 ? (__mmask16)0xffff : (__mmask16)((1u << rows) - 1), v);
}

// vdpbf16ps, written out: the library is built for AVX-512 without
// AVX512_BF16, and runs this only where the CPU has it (pb_hw).
DT_INLINE __m512 dpbf16(__m512 acc, __m512i a, __m512i b) {
	__asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
	return acc;
}

// pf_w is a row's block at p as the tiles hold it: F16 widened to floats,
// BF16 its u32 pairs.
DT_INLINE __m512i pf_w(const int KIND, const uint8_t *p) {
	return KIND ? _mm512_loadu_si512(p) : _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)));
}

// pf_dot adds a row's block w times the activations' block x into the
// row's 16 lanes: F16 one FMA a column; BF16 a lane a pair of columns,
// by vdpbf16ps or its two FMAs (the weights' pairs split by a mask and a
// shift, against the activations split alike).
DT_INLINE __m512 pf_dot(const int KIND, __m512 acc, __m512i w, const float *x) {
	if (KIND == 0) return _mm512_fmadd_ps(_mm512_castsi512_ps(w), _mm512_load_ps(x), acc);
	if (KIND == 2) return dpbf16(acc, w, _mm512_load_si512(x));
	acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000))), _mm512_load_ps(x), acc);
	return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), _mm512_load_ps(x + 16), acc);
}

// pf_rows is one activation row x against a group's rows (pg, nk blocks).
DT_INLINE void pf_rows(const int KIND, const uint8_t *pg, int rows, int64_t nk, const float *x, float *out) {
	__m512 acc[PF_ROWS];
	#pragma GCC unroll 16
	for (int i = 0; i < PF_ROWS; i++) acc[i] = _mm512_setzero_ps();
	for (int64_t k = 0; k < nk; k++) {
		const uint8_t *pb = pg + k * PF_BB(KIND);
		for (int l = 0; l < PF_BB(KIND); l += 64) _mm_prefetch((const char *)pb + PF_AHEAD + l, _MM_HINT_T0);
		#pragma GCC unroll 16
		for (int i = 0; i < PF_ROWS; i++) acc[i] = pf_dot(KIND, acc[i], pf_w(KIND, pb + PF_RB(KIND) * i), x + PF_XB(KIND) * k);
	}
	for (int i = 0; i < rows; i++) out[i] = pf_sum(acc[i]);
}

// pf_tile continues weight rows i..i+PF_RT-1 of a group against NT
// activation rows (x, xs floats apart) over blocks [k0, k1): row i+t's 16
// lanes against activation row j in lanes[(i+t)*PF_LANES + 16*j], from 0
// when first. Four weight rows and up to six activation rows keep both in
// registers: 10 loads for 24 FMAs (F16) or vdpbf16ps.
DT_INLINE void pf_tile(const int NT, const int KIND, const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x,
                       int64_t xs, float *lanes, int first) {
	__m512 acc[PF_RT][PF_NT];
	#pragma GCC unroll 4
	for (int t = 0; t < PF_RT; t++)
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++)
			acc[t][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (i + t) * PF_LANES + 16 * j);
	for (int64_t k = k0; k < k1; k++) {
		__m512i w[PF_RT];
		#pragma GCC unroll 4
		for (int t = 0; t < PF_RT; t++) w[t] = pf_w(KIND, pg + k * PF_BB(KIND) + PF_RB(KIND) * (i + t));
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++) {
			const float *xj = x + j * xs + PF_XB(KIND) * k;
			#pragma GCC unroll 4
			for (int t = 0; t < PF_RT; t++) acc[t][j] = pf_dot(KIND, acc[t][j], w[t], xj);
		}
	}
	#pragma GCC unroll 4
	for (int t = 0; t < PF_RT; t++)
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++) _mm512_storeu_ps(lanes + (i + t) * PF_LANES + 16 * j, acc[t][j]);
}

#else

// At AVX2 a row's 16 lanes are two ymm, lo and hi. pf_w is half h of a
// row's block at p (F16: columns 8h..8h+7, widened; BF16: pairs 8h..8h+7),
// pf_dot its product with the activations' block x (KIND 2 does not
// occur below AVX-512).
DT_INLINE __m256i pf_w(const int KIND, const uint8_t *p, int h) {
	return KIND ? _mm256_loadu_si256((const __m256i *)(p + 32 * h)) : _mm256_castps_si256(widen8(0, p + 16 * h));
}

DT_INLINE __m256 pf_dot(const int KIND, __m256 acc, __m256i w, const float *x, int h) {
	if (KIND == 0) return _mm256_fmadd_ps(_mm256_castsi256_ps(w), _mm256_loadu_ps(x + 8 * h), acc);
	acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000))), _mm256_loadu_ps(x + 8 * h), acc);
	return _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), _mm256_loadu_ps(x + 16 + 8 * h), acc);
}

DT_INLINE void pf_rows(const int KIND, const uint8_t *pg, int rows, int64_t nk, const float *x, float *out) {
	__m256 lo[PF_ROWS], hi[PF_ROWS];
	#pragma GCC unroll 8
	for (int i = 0; i < PF_ROWS; i++) lo[i] = hi[i] = _mm256_setzero_ps();
	for (int64_t k = 0; k < nk; k++) {
		const uint8_t *pb = pg + k * PF_BB(KIND);
		for (int l = 0; l < PF_BB(KIND); l += 64) _mm_prefetch((const char *)pb + PF_AHEAD + l, _MM_HINT_T0);
		#pragma GCC unroll 8
		for (int i = 0; i < PF_ROWS; i++) {
			const uint8_t *p = pb + PF_RB(KIND) * i;
			lo[i] = pf_dot(KIND, lo[i], pf_w(KIND, p, 0), x + PF_XB(KIND) * k, 0);
			hi[i] = pf_dot(KIND, hi[i], pf_w(KIND, p, 1), x + PF_XB(KIND) * k, 1);
		}
	}
	for (int i = 0; i < rows; i++) out[i] = pf_reduce(lo[i], hi[i]);
}

DT_INLINE void pf_tile(const int NT, const int KIND, const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x,
                       int64_t xs, float *lanes, int first) {
	__m256 lo[PF_NT], hi[PF_NT];
	#pragma GCC unroll 8
	for (int j = 0; j < NT; j++) {
		lo[j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(lanes + i * PF_LANES + 16 * j);
		hi[j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(lanes + i * PF_LANES + 16 * j + 8);
	}
	for (int64_t k = k0; k < k1; k++) {
		const uint8_t *p = pg + k * PF_BB(KIND) + PF_RB(KIND) * i;
		const __m256i w0 = pf_w(KIND, p, 0), w1 = pf_w(KIND, p, 1);
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++) {
			lo[j] = pf_dot(KIND, lo[j], w0, x + j * xs + PF_XB(KIND) * k, 0);
			hi[j] = pf_dot(KIND, hi[j], w1, x + j * xs + PF_XB(KIND) * k, 1);
		}
	}
	#pragma GCC unroll 8
	for (int j = 0; j < NT; j++)
		_mm256_storeu_ps(lanes + i * PF_LANES + 16 * j, lo[j]), _mm256_storeu_ps(lanes + i * PF_LANES + 16 * j + 8, hi[j]);
}

#endif

// A level's tiles by activation rows: F16's (KIND 0), BF16's split (1),
// BF16's with vdpbf16ps (2).
typedef void (*pf_fn)(const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x, int64_t xs, float *lanes, int first);
typedef void (*pf_rows_fn)(const uint8_t *pg, int rows, int64_t nk, const float *x, float *out);
#define PF_FN(KIND, NT)                                                                                          \
	static void pf_tile_##KIND##_##NT(const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x,           \
	                                  int64_t xs, float *lanes, int first) {                                      \
		pf_tile(NT, KIND, pg, i, k0, k1, x, xs, lanes, first);                                                   \
	}
#define PF_FNS(KIND)                                                                                             \
	PF_FN(KIND, 1) PF_FN(KIND, 2) PF_FN(KIND, 3) PF_FN(KIND, 4) PF_FN(KIND, 5) PF_FN(KIND, 6)                    \
	static pf_fn const pf_tiles_##KIND[PF_NT + 1] = {0, pf_tile_##KIND##_1, pf_tile_##KIND##_2, pf_tile_##KIND##_3, \
	                                                 pf_tile_##KIND##_4, pf_tile_##KIND##_5, pf_tile_##KIND##_6};     \
	static void pf_rows_##KIND(const uint8_t *pg, int rows, int64_t nk, const float *x, float *out) {           \
		pf_rows(KIND, pg, rows, nk, x, out);                                                                     \
	}
PF_FNS(0)
PF_FNS(1)
#if defined(DT_AVX512)
PF_FNS(2)
#endif

// pb_hw tells whether this CPU runs vdpbf16ps (AVX512_BF16).
static int pb_hw(void) {
#if defined(DT_AVX512)
	static int hw = -1;
	if (hw < 0) hw = __builtin_cpu_supports("avx512bf16") ? 1 : 0;
	return hw;
#else
	return 0;
#endif
}

// pf_scalar is the product value by value, where there is no memory for
// the activations' buffer: the rows' sums in the same lanes, chains and
// tree.
static void pf_scalar(const int BF, float *out, int64_t ldo, const uint8_t *pw, int64_t lo, int64_t hi,
                      const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	const int64_t bs = BF ? 64 : 32, nk = 2 * cols / bs;
	for (int64_t j = 0; j < n; j++)
		for (int64_t r = lo; r < hi; r++) {
			const uint8_t *pg = pw + (r / PF_ROWS) * nk * PF_ROWS * bs + (r % PF_ROWS) * bs;
			float lane[16] = {0};
			for (int64_t k = 0; k < nk; k++)
				for (int l = 0; l < 16; l++) {
					const uint8_t *w = pg + k * PF_ROWS * bs, *x = act + j * arb + k * bs;
					if (BF) {
						lane[l] = fmaf(bf16_to_f32(ld16(w + 4 * l + 2)), bf16_to_f32(ld16(x + 4 * l + 2)), lane[l]);
						lane[l] = fmaf(bf16_to_f32(ld16(w + 4 * l)), bf16_to_f32(ld16(x + 4 * l)), lane[l]);
					} else {
						lane[l] = fmaf(f16_to_f32(ld16(w + 2 * l)), f16_to_f32(ld16(x + 2 * l)), lane[l]);
					}
				}
			out[j * ldo + r] = pf_reduce(_mm256_loadu_ps(lane), _mm256_loadu_ps(lane + 8));
		}
}

// pf_matmul runs the groups holding rows [lo, hi) (lo a multiple of the
// group) against n activation rows.
static void pf_matmul(const int BF, float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                      const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	const int kind = BF ? 1 + pb_hw() : 0;
	const int64_t bb = BF ? PF_BB(1) : PF_BB(0), nk = cols / (BF ? 32 : 16), kc = BF ? PB_KC : PF_KC;
	const int64_t g1 = (hi + PF_ROWS - 1) / PF_ROWS;
	float lanes[PF_ROWS * PF_LANES]; // each row's lanes against each activation row
	int64_t xs;
	const float *x = BF ? pb_split(kind == 2, act, arb, n, cols, &xs) : widen_rows(0, act, arb, n, cols, &xs);
	if (!x) {
		pf_scalar(BF, out, ldo, pw, lo, hi, act, arb, n, cols);
		return;
	}
	pf_fn const *tiles = kind == 0 ? pf_tiles_0 : kind == 1 ? pf_tiles_1 : PF_TILES_2;
	pf_rows_fn const rows_fn = kind == 0 ? pf_rows_0 : kind == 1 ? pf_rows_1 : PF_ROWS_2;
	for (int64_t g = lo / PF_ROWS; g < g1; g++) {
		const uint8_t *pg = pw + g * nk * bb;
		const int r = rows - g * PF_ROWS < PF_ROWS ? (int)(rows - g * PF_ROWS) : PF_ROWS;
		if (n == 1) {
			rows_fn(pg, r, nk, x, out + g * PF_ROWS);
			continue;
		}
		// Blocks in pieces of kc, every row of the group through a piece
		// before the next, the lanes kept between: a piece of the
		// activations stays in L1 for all of them.
		for (int64_t j0 = 0; j0 < n; j0 += PF_NT) {
			const int nt = n - j0 < PF_NT ? (int)(n - j0) : PF_NT;
			for (int64_t k0 = 0; k0 < nk; k0 += kc)
				for (int i = 0; i < PF_ROWS; i += PF_RT) {
					// The next piece (or group) in parts, a tile's pass
					// each: the piece is read a few rows at a time, 32
					// bytes a row every block, which no prefetcher follows.
					const int part = (int)(kc * bb * PF_RT / PF_ROWS);
					const char *next = (const char *)pg + (k0 + kc) * bb + i / PF_RT * part;
					for (int l = 0; l < part; l += 64) _mm_prefetch(next + l, _MM_HINT_T0);
					// Rows past the last (zeros in a partial group) are
					// computed and not stored.
					tiles[nt](pg, i, k0, k0 + kc < nk ? k0 + kc : nk, x + j0 * xs, xs, lanes, k0 == 0);
				}
#if defined(DT_AVX512)
			for (int j = 0; j < nt; j++) pf_reduce16(lanes + 16 * j, PF_LANES, out + (j0 + j) * ldo + g * PF_ROWS, r);
#else
			for (int i = 0; i < r; i++)
				for (int j = 0; j < nt; j++) {
					const float *l = lanes + i * PF_LANES + 16 * j;
					out[(j0 + j) * ldo + g * PF_ROWS + i] = pf_reduce(_mm256_loadu_ps(l), _mm256_loadu_ps(l + 8));
				}
#endif
		}
	}
}

#endif

DT_API void dt_pack_f16(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {
#if defined(PF_ROWS)
	pf_pack(dst, w, rb, rows, cols, 32);
#else
	(void)dst, (void)w, (void)rb, (void)rows, (void)cols;
#endif
}

DT_API void dt_pack_bf16(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {
#if defined(PF_ROWS)
	pf_pack(dst, w, rb, rows, cols, 64);
#else
	(void)dst, (void)w, (void)rb, (void)rows, (void)cols;
#endif
}

// dt_matmul_packed_f16 is dt_matmul_f16 over packed weights, for weight
// rows [lo, hi) (lo a multiple of the level's group); amx is unused.
DT_API void dt_matmul_packed_f16(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                                 const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t amx) {
	(void)amx;
#if defined(PF_ROWS)
	pf_matmul(0, out, ldo, pw, rows, lo, hi, act, arb, n, cols);
#else
	(void)out, (void)ldo, (void)pw, (void)rows, (void)lo, (void)hi, (void)act, (void)arb, (void)n, (void)cols;
#endif
}

DT_API void dt_matmul_packed_bf16(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                                  const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t amx) {
	(void)amx;
#if defined(PF_ROWS)
	pf_matmul(1, out, ldo, pw, rows, lo, hi, act, arb, n, cols);
#else
	(void)out, (void)ldo, (void)pw, (void)rows, (void)lo, (void)hi, (void)act, (void)arb, (void)n, (void)cols;
#endif
}
