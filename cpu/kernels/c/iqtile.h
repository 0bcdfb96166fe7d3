// The 2- and 3-bit i-quants against several activation rows at AVX-512:
// tile512.h's scheme, the weights unpacked as they are multiplied.
//
// Their row kernel (iq.h) unpacks a super-block of a weight row (grid
// entries, sign bytes, scales) and then takes each activation row in turn
// with 256-bit multiplies that reduce horizontally: verifying 16 tokens
// cost about sixteen times decoding one, and prefill ran far behind the
// peers' (docs/measurements/kernels-i-quants.md, "The i-quants' tiles").
// Here the super-blocks of 16 weight rows are unpacked once into signed
// bytes, moved 64 up (unsigned, for vpdpbusd; |value| ≤ 62), transposed
// so that lane i is row i (transpose32), and every activation row then
// costs 8 vpdpbusd per 32 values for all 16 weight rows.
//
// The sums stay integers until the super-block ends: per 16 values a
// vpdpbusd sum times its scale 2s+1 (vpmulld), less 64 × Σ (2s+1)·(the
// activations' 16-value sums, Q8_K's bsums), which is exactly the row
// kernel's iq_bsum; then, as the row kernel does, (d·dy)·sum added into
// the row's float sum and F times it stored. The result is the row
// kernel's bit for bit, so a tree's verification scores each node as
// decoding it alone does.
#ifndef DOVETAIL_IQTILE_H
#define DOVETAIL_IQTILE_H
#include "tile512.h"

#define IQT_OFF 64  // added to the values for vpdpbusd's unsigned operand
#define IQT_JC 64   // activation rows whose float sums one pass holds
#define IQT_MIN_N 4 // fewer activation rows take the row kernel

// iq_tile is one super-block of 16 weight rows, unpacked.
typedef struct {
	uint8_t w[8][8][64]; // 32-value chunk c, vector v: lane i = values 32c+4v..+3 of row i, +IQT_OFF
	int32_t ls[16][16];  // 16-value sub-block k's scale 2s+1, lane i = row i
	int32_t cp[8][16];   // lane i: ls[2u] | ls[2u+1] << 16, against bsums 2u, 2u+1
	float d[16];         // the rows' scales; 0 past the last row
} iq_tile;

// iq_tile_fill unpacks super-block b of rows [r0, r0+rows) of w (row
// stride rb, super-blocks of size bytes) with groups (iq.h's unpackers).
#define IQ_TILE_FILL(name, SIZE, groups, dfn)                                                                  \
	DT_INLINE void name(iq_tile *t, const uint8_t *w, int64_t rb, int64_t r0, int rows, int64_t b) {         \
		uint8_t tmp[16][256] __attribute__((aligned(64)));                                                   \
		int16_t ls[16][16];                                                                                  \
		for (int i = 0; i < 16; i++) {                                                                       \
			if (i >= rows) {                                                                                 \
				memset(tmp[i], IQT_OFF, sizeof tmp[i]);                                                      \
				memset(ls[i], 0, sizeof ls[i]);                                                              \
				t->d[i] = 0;                                                                                 \
				continue;                                                                                    \
			}                                                                                                \
			const uint8_t *wb = w + (r0 + i) * rb + b * (SIZE);                                              \
			iq_group g[8];                                                                                   \
			groups(wb, g);                                                                                   \
			t->d[i] = dfn(wb);                                                                               \
			for (int ib = 0; ib < 8; ib++) {                                                                 \
				const __m256i v = _mm256_mask_sub_epi8(g[ib].q, g[ib].neg, _mm256_setzero_si256(), g[ib].q);  \
				_mm256_store_si256((__m256i *)(tmp[i] + 32 * ib), _mm256_add_epi8(v, _mm256_set1_epi8(IQT_OFF))); \
				ls[i][2 * ib] = (int16_t)_mm256_extract_epi16(g[ib].sc, 0);                                  \
				ls[i][2 * ib + 1] = (int16_t)_mm256_extract_epi16(g[ib].sc, 8);                              \
			}                                                                                                \
		}                                                                                                    \
		iq_tile_finish(t, tmp, ls);                                                                          \
	}

// iq_tile_finish transposes the unpacked rows into t's lanes.
DT_INLINE void iq_tile_finish(iq_tile *t, uint8_t tmp[16][256], int16_t ls[16][16]) {
	for (int c = 0; c < 8; c++) {
		const uint8_t *p[16];
		for (int i = 0; i < 16; i++) p[i] = tmp[i] + 32 * c;
		__m512i W[8];
		transpose32(p, 0, W);
		for (int v = 0; v < 8; v++) _mm512_store_si512(t->w[c][v], W[v]);
	}
	for (int k = 0; k < 16; k++)
		for (int i = 0; i < 16; i++) t->ls[k][i] = ls[i][k];
	for (int u = 0; u < 8; u++) {
		const __m512i a = _mm512_load_si512(t->ls[2 * u]), c = _mm512_load_si512(t->ls[2 * u + 1]);
		_mm512_store_si512(t->cp[u], _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(c, 16)));
	}
}

// iq_tile_sums is the exact integer sum of tile t against the Q8_K block
// of NT activation rows at x (stride arb), lane i for weight row i.
DT_INLINE void iq_tile_sums(const int NT, const iq_tile *t, const uint8_t *x, int64_t arb, __m512i is[4]) {
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) is[j] = _mm512_setzero_si512();
	for (int c = 0; c < 8; c++) {
		__m512i W[8];
		#pragma GCC unroll 8
		for (int v = 0; v < 8; v++) W[v] = _mm512_load_si512(t->w[c][v]);
		const __m512i l0 = _mm512_load_si512(t->ls[2 * c]), l1 = _mm512_load_si512(t->ls[2 * c + 1]);
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = x + j * arb + 4 + 32 * c;
			__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
			#pragma GCC unroll 4
			for (int v = 0; v < 4; v++) {
				s0 = _mm512_dpbusd_epi32(s0, W[v], _mm512_set1_epi32(ld32(y + 4 * v)));
				s1 = _mm512_dpbusd_epi32(s1, W[4 + v], _mm512_set1_epi32(ld32(y + 16 + 4 * v)));
			}
			is[j] = _mm512_add_epi32(is[j], _mm512_add_epi32(_mm512_mullo_epi32(s0, l0), _mm512_mullo_epi32(s1, l1)));
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) {
		const uint8_t *y = x + j * arb;
		__m512i ci = _mm512_setzero_si512();
		#pragma GCC unroll 8
		for (int u = 0; u < 8; u++) ci = _mm512_dpwssd_epi32(ci, _mm512_load_si512(t->cp[u]), _mm512_set1_epi32(ld32(y + 260 + 4 * u)));
		is[j] = _mm512_sub_epi32(is[j], _mm512_slli_epi32(ci, 6)); // × IQT_OFF
	}
}

// iq_tile_add adds tile t's products with NT activation rows into their
// float sums acc (16 lanes a row): (d·dy)·sum, as the row kernel adds.
DT_INLINE void iq_tile_add(const int NT, const iq_tile *t, const uint8_t *x, int64_t arb, float (*acc)[16]) {
	__m512i is[4];
	iq_tile_sums(NT, t, x, arb, is);
	const __m512 d = _mm512_loadu_ps(t->d);
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) {
		const __m512 p = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(ldf(x + j * arb))), _mm512_cvtepi32_ps(is[j]));
		_mm512_storeu_ps(acc[j], _mm512_add_ps(_mm512_loadu_ps(acc[j]), p));
	}
}

// IQ_TILES defines iq_tiles_NAME, the product of rows [lo, hi) with n
// activation rows through tiles filled by fill, scaled by F at the end.
#define IQ_TILES(name, fill, F)                                                                                 \
	static __attribute__((noinline)) void iq_tiles_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,    \
	                            const uint8_t *act, int64_t arb, int64_t n, int64_t nb) {                       \
		iq_tile t __attribute__((aligned(64)));                                                              \
		float acc[IQT_JC][16];                                                                               \
		for (int64_t r0 = lo; r0 < hi; r0 += 16) {                                                           \
			const int rows = hi - r0 < 16 ? (int)(hi - r0) : 16;                                             \
			for (int64_t j0 = 0; j0 < n; j0 += IQT_JC) {                                                     \
				const int nj = n - j0 < IQT_JC ? (int)(n - j0) : IQT_JC;                                     \
				memset(acc, 0, sizeof acc);                                                                  \
				for (int64_t b = 0; b < nb; b++) {                                                           \
					fill(&t, w, rb, r0, rows, b);                                                            \
					const uint8_t *x = act + j0 * arb + b * Q8_K_SIZE;                                       \
					int j = 0;                                                                               \
					for (; j + 4 <= nj; j += 4) iq_tile_add(4, &t, x + j * arb, arb, acc + j);               \
					for (; j < nj; j++) iq_tile_add(1, &t, x + j * arb, arb, acc + j);                       \
				}                                                                                            \
				for (int j = 0; j < nj; j++)                                                                 \
					for (int i = 0; i < rows; i++) out[(j0 + j) * ldo + r0 + i] = (F) * acc[j][i];           \
			}                                                                                                \
		}                                                                                                    \
	}

#endif
