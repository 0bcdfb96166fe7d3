// Packed F16 and BF16 weights: rows in the level's groups (16 at AVX-512,
// 8 at AVX2, the last padded with zero rows), each group's columns one
// after another, a column the group's values side by side:
//
//	column c: row 0's value c, row 1's, ... (2 bytes each)
//
// the file's bytes in another order. A product then streams one run of
// memory a group, as the quantized types' packed products do (a small
// model's rows in the GGUF layout were streams too short for the hardware
// prefetchers), and each column is one vector of the group's rows: widened
// once, it meets every activation row as a broadcast, so verifying 16
// rows costs 16 FMAs a column and one conversion, where the row layout
// converted the weights again for every 4 activation rows.
//
// A row's sum is one FMA chain over its columns in order, from 0,
// whatever the number of activation rows and at either level: a tree's
// verification scores each node bit for bit as decoding it alone does.
// Decoding (one activation row) takes four groups at once so that four
// chains hide the FMA's latency. The activations come widened to float32
// (f16 and bf16 convert exactly) into a buffer of the thread's.
#include "common.h"
#include <stdlib.h>

#if defined(DT_AVX512)
#define PF_ROWS 16
#define PF_NT 16
#elif defined(DT_AVX2)
#define PF_ROWS 8
#define PF_NT 8
#endif
#define PF_AHEAD 2048 // bytes of a group's stream prefetched ahead

#if defined(PF_ROWS)

// pf_pack packs rows [0, rows) of an F16 or BF16 matrix (rb bytes apart).
static void pf_pack(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {
	const int64_t groups = (rows + PF_ROWS - 1) / PF_ROWS;
	for (int64_t g = 0; g < groups; g++) {
		uint8_t *d = dst + g * cols * PF_ROWS * 2;
		for (int i = 0; i < PF_ROWS; i++) {
			const int64_t r = g * PF_ROWS + i;
			if (r >= rows) {
				for (int64_t c = 0; c < cols; c++) memset(d + (c * PF_ROWS + i) * 2, 0, 2);
				continue;
			}
			for (int64_t c = 0; c < cols; c++) memcpy(d + (c * PF_ROWS + i) * 2, w + r * rb + 2 * c, 2);
		}
	}
}

// pf_widen returns the n activation rows (f16, or bf16 for BF) as float32
// in a buffer of the thread's, grown as needed (0 if it cannot be), in
// the order the tiles read them: per chunk of PF_NT rows (starting at
// row j0, nt rows), column c's values side by side at j0*cols + c*nt. A
// tile then reads one line for 16 rows' values of a column, where rows a
// multiple of 4 KB apart would all fall in one set of the L1 cache.
static float *pf_widen(const int BF, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	static __thread float *buf;
	static __thread int64_t cap;
	if (n * cols > cap) {
		float *b = realloc(buf, (size_t)(n * cols) * sizeof *b);
		if (!b) return 0;
		buf = b, cap = n * cols;
	}
	for (int64_t j = 0; j < n; j++) {
		const uint8_t *a = act + j * arb;
		const int64_t j0 = j - j % PF_NT, nt = n - j0 < PF_NT ? n - j0 : PF_NT;
		float *x = buf + j0 * cols + (j - j0);
		int64_t c = 0;
		for (; c + 8 <= cols; c += 8) {
			const __m128i h = _mm_loadu_si128((const __m128i *)(a + 2 * c));
			float v[8];
			_mm256_storeu_ps(v, BF ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h));
			for (int i = 0; i < 8; i++) x[(c + i) * nt] = v[i];
		}
		for (; c < cols; c++) x[c * nt] = BF ? bf16_to_f32(ld16(a + 2 * c)) : f16_to_f32(ld16(a + 2 * c));
	}
	return buf;
}

#if defined(DT_AVX512)
typedef __m512 pf_vec;
DT_INLINE pf_vec pf_load(const int BF, const uint8_t *p) {
	const __m256i h = _mm256_loadu_si256((const __m256i *)p);
	return BF ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}
#define pf_zero _mm512_setzero_ps
#define pf_fma _mm512_fmadd_ps
#define pf_set1 _mm512_set1_ps
DT_INLINE void pf_store(float *out, int rows, pf_vec v) {
	_mm512_mask_storeu_ps(out, rows == 16 ? (__mmask16)0xffff : (__mmask16)((1u << rows) - 1), v);
}
#else
typedef __m256 pf_vec;
DT_INLINE pf_vec pf_load(const int BF, const uint8_t *p) {
	const __m128i h = _mm_loadu_si128((const __m128i *)p);
	return BF ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}
#define pf_zero _mm256_setzero_ps
#define pf_fma _mm256_fmadd_ps
#define pf_set1 _mm256_set1_ps
DT_INLINE void pf_store(float *out, int rows, pf_vec v) {
	_mm256_maskstore_ps(out, _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), v);
}
#endif

#define PF_COL (PF_ROWS * 2) // bytes of one column of a group

// pf_tile multiplies one group (pg) by NT activation rows (x: pf_widen's
// chunk) over cols columns.
DT_INLINE void pf_tile(const int NT, const int BF, const uint8_t *pg, int rows, int64_t cols, const float *x,
                       float *out, int64_t ldo) {
	pf_vec acc[PF_NT];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = pf_zero();
	for (int64_t c = 0; c < cols; c++) {
		if ((c * PF_COL) % 64 == 0) _mm_prefetch((const char *)pg + c * PF_COL + PF_AHEAD, _MM_HINT_T0);
		const pf_vec w = pf_load(BF, pg + c * PF_COL);
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) acc[j] = pf_fma(w, pf_set1(x[c * NT + j]), acc[j]);
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) pf_store(out + j * ldo, rows, acc[j]);
}

// pf_tile4 is pf_tile for one activation row and four whole groups (pg,
// gb bytes apart), whose four chains overlap.
DT_INLINE void pf_tile4(const int BF, const uint8_t *pg, int64_t gb, int64_t cols, const float *x, float *out) {
	pf_vec acc[4] = {pf_zero(), pf_zero(), pf_zero(), pf_zero()};
	for (int64_t c = 0; c < cols; c++) {
		const pf_vec xc = pf_set1(x[c]);
		#pragma GCC unroll 4
		for (int g = 0; g < 4; g++) {
			const uint8_t *p = pg + g * gb + c * PF_COL;
			if ((c * PF_COL) % 64 == 0) _mm_prefetch((const char *)p + PF_AHEAD, _MM_HINT_T0);
			acc[g] = pf_fma(pf_load(BF, p), xc, acc[g]);
		}
	}
	#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) pf_store(out + g * PF_ROWS, PF_ROWS, acc[g]);
}

typedef void (*pf_fn)(const int BF, const uint8_t *pg, int rows, int64_t cols, const float *x, float *out, int64_t ldo);
#define PF_FN(NT)                                                                                              \
	static void pf_tile_##NT(const int BF, const uint8_t *pg, int rows, int64_t cols, const float *x, float *out, \
	                         int64_t ldo) {                                                                    \
		if (BF)                                                                                                 \
			pf_tile(NT, 1, pg, rows, cols, x, out, ldo);                                                        \
		else                                                                                                    \
			pf_tile(NT, 0, pg, rows, cols, x, out, ldo);                                                        \
	}
PF_FN(1) PF_FN(2) PF_FN(3) PF_FN(4) PF_FN(5) PF_FN(6) PF_FN(7) PF_FN(8)
#if PF_NT > 8
PF_FN(9) PF_FN(10) PF_FN(11) PF_FN(12) PF_FN(13) PF_FN(14) PF_FN(15) PF_FN(16)
#endif
static pf_fn const pf_tiles[PF_NT + 1] = {0, pf_tile_1, pf_tile_2, pf_tile_3, pf_tile_4, pf_tile_5, pf_tile_6, pf_tile_7, pf_tile_8,
#if PF_NT > 8
                                          pf_tile_9, pf_tile_10, pf_tile_11, pf_tile_12, pf_tile_13, pf_tile_14, pf_tile_15, pf_tile_16
#endif
};

// pf_matmul runs the groups holding rows [lo, hi) (lo a multiple of the
// group) against n activation rows.
static void pf_matmul(const int BF, float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                      const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	const float *x = pf_widen(BF, act, arb, n, cols);
	if (!x) {
		// No memory for the widened rows: one row, one value at a time
		// (the same chain of FMAs).
		for (int64_t j = 0; j < n; j++)
			for (int64_t r = lo; r < hi; r++) {
				const uint8_t *pg = pw + (r / PF_ROWS) * cols * PF_COL + (r % PF_ROWS) * 2;
				float s = 0;
				for (int64_t c = 0; c < cols; c++) {
					const uint16_t hw = ld16(pg + c * PF_COL), hx = ld16(act + j * arb + 2 * c);
					s = fmaf(BF ? bf16_to_f32(hw) : f16_to_f32(hw), BF ? bf16_to_f32(hx) : f16_to_f32(hx), s);
				}
				out[j * ldo + r] = s;
			}
		return;
	}
	const int64_t gb = cols * PF_COL, g1 = (hi + PF_ROWS - 1) / PF_ROWS;
	int64_t g = lo / PF_ROWS;
	if (n == 1)
		for (; g + 4 <= g1 && (g + 4) * PF_ROWS <= rows; g += 4) {
			if (BF)
				pf_tile4(1, pw + g * gb, gb, cols, x, out + g * PF_ROWS);
			else
				pf_tile4(0, pw + g * gb, gb, cols, x, out + g * PF_ROWS);
		}
	for (; g < g1; g++) {
		const int r = rows - g * PF_ROWS < PF_ROWS ? (int)(rows - g * PF_ROWS) : PF_ROWS;
		for (int64_t j0 = 0; j0 < n; j0 += PF_NT) {
			const int nt = n - j0 < PF_NT ? (int)(n - j0) : PF_NT;
			pf_tiles[nt](BF, pw + g * gb, r, cols, x + j0 * cols, out + j0 * ldo + g * PF_ROWS, ldo);
		}
	}
}

#endif

// dt_pack_f16 packs an F16 or BF16 matrix (both are 2-byte values).
DT_API void dt_pack_f16(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {
#if defined(PF_ROWS)
	pf_pack(dst, w, rb, rows, cols);
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
