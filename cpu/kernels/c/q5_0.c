// Q5_0 weights × Q8_0 activations. A Q5_0 block is an f16 scale, a
// little-endian uint32 qh whose bit j is the fifth bit of value j, and 16
// bytes of nibbles (value j in the low nibble of qs[j] for j < 16, in the
// high nibble of qs[j-16] otherwise); the values are 0..31 less 16.
// llama.cpp falls back to Q5_0 in Q4_K_M files for matrices whose rows
// are not whole 256-value super-blocks (Qwen2's 896-wide ones).
//
// With SIMD, one weight row against up to four activation rows, the signed
// products through maddubs with the sign moved onto the activations (as in
// iq4.c); the portable dot elsewhere.
#include "rows.h"
#include "tile512.h"

#define Q5_0_SIZE 22

#if defined(DT_AVX512)

// The AVX-512 level multiplies 16-row tiles (tile512.h) from the GGUF
// layout, as Q4_0's (matmul_q4.c): a block's nibbles transposed into
// lanes, each value's fifth bit added as 16, so that the weights are q+16
// (0..31) for vpdpbusd and the 16 come off through the activation table.
// Qwen2's 896-wide matrices are Q5_0 in Q4_K_M files: with the row kernel
// they multiplied several times slower than the Q4_K rows beside them.
// One activation row alone still takes the row kernel, which reads the
// weight rows one after the other: it decoded faster than the tiles'
// sixteen interleaved rows (docs/measurements, "Q5_0").

// q5_0_bits gives the fifth bits of values 4G..4G+3 of the 16 rows (qh
// of row i in lane i of H) as 16 in the bytes of W[G], added in: they
// are bits 4(G%2)..4(G%2)+3 of qh's byte G/2.
DT_INLINE __m512i q5_0_bits(__m512i W, __m512i H, int G) {
	const __m512i pick = _mm512_add_epi8(_mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0), _mm512_set1_epi8((char)(G / 2)));
	const __m512i bit = _mm512_set1_epi32(G % 2 ? (int)0x80402010 : 0x08040201);
	const __mmask64 m = _mm512_test_epi8_mask(_mm512_shuffle_epi8(H, pick), bit);
	return _mm512_mask_add_epi8(W, m, W, _mm512_set1_epi8(16));
}

// q5_0_qh gathers the 16 rows' qh at offset o.
DT_INLINE __m512i q5_0_qh(const uint8_t *const p[16], int64_t o) {
	int32_t h[16];
	#pragma GCC unroll 16
	for (int i = 0; i < 16; i++) h[i] = (int32_t)ld32(p[i] + o);
	return _mm512_loadu_si512(h);
}

DT_INLINE void q5_0_tile(const int NT, const uint8_t *w, int64_t rb, int rows, int64_t b0, int64_t nbc,
                         const uint8_t *act, int64_t arb, const q8a *tab, int64_t ts, float *out, int64_t ldo,
                         int add) {
	const uint8_t *p[16];
	tile_rows(w, rb, rows, p);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nbc; b++) {
		const int64_t o = (b0 + b) * Q5_0_SIZE;
		prefetch_rows(p, o, 1);
		const __m512 dw = f16_rows(p, o);
		const __m512i H = q5_0_qh(p, o + 2);
		__m512i T[4], W[8];
		transpose16(p, o + 6, T);
		#pragma GCC unroll 4
		for (int g = 0; g < 4; g++) {
			W[g] = q5_0_bits(_mm512_and_si512(T[g], m4), H, g);                                   // values 4g..4g+3
			W[g + 4] = q5_0_bits(_mm512_and_si512(_mm512_srli_epi16(T[g], 4), m4), H, g + 4); // values 16+4g..
		}
		acc_block(NT, acc, W, dw, act + (b0 + b) * Q8_0_SIZE + 2, arb, tab, ts, b);
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], add);
}

TILE_FNS(q5_0_tile)

#endif

#if defined(DT_AVX2)

// q5_0_values unpacks a block's 32 values as int8 in -16..15.
DT_INLINE __m256i q5_0_values(const uint8_t *wb) {
	const __m128i bits = _mm_loadu_si128((const __m128i *)(wb + 6)), m4 = _mm_set1_epi8(0x0f);
	const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bits, 4), m4), _mm_and_si128(bits, m4));
	// Byte i of hb is byte i/8 of qh; ORing every bit but i%8 and comparing
	// with all ones leaves 0xff where bit i of qh is set.
	const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
	__m256i hb = _mm256_shuffle_epi8(_mm256_set1_epi32((int)ld32(wb + 2)), shuf);
	hb = _mm256_cmpeq_epi8(_mm256_or_si256(hb, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
	// Without the fifth bit a value is nibble-16: the nibble with 0xf0 set.
	return _mm256_or_si256(nib, _mm256_andnot_si256(hb, _mm256_set1_epi8((char)0xf0)));
}

DT_INLINE void q5_0_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	__m256 acc[4];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q5_0_SIZE;
		const __m256i v = q5_0_values(wb), absv = _mm256_sign_epi8(v, v);
		const float d = f16_to_f32(ld16(wb));
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_0_SIZE;
			const __m256i av = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(y + 2)), v);
			const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(absv, av), _mm256_set1_epi16(1));
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * f16_to_f32(ld16(y))), _mm256_cvtepi32_ps(s), acc[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]);
}

ROW_FNS(q5_0_row)

#else

// dot_q5_0 mirrors quant.DotQ5_0Q8_0's integer sums.
static float dot_q5_0(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += Q5_0_SIZE, x += Q8_0_SIZE) {
		const uint32_t qh = (uint32_t)ld32(w + 2);
		const int8_t *q8 = (const int8_t *)(x + 2);
		int32_t sumi = 0;
		for (int j = 0; j < QK / 2; j++) {
			const int x0 = (int)((w[6 + j] & 0xf) | ((qh >> j & 1) << 4)) - 16;
			const int x1 = (int)((w[6 + j] >> 4) | ((qh >> (j + 16) & 1) << 4)) - 16;
			sumi += x0 * q8[j] + x1 * q8[j + 16];
		}
		sumf += f16_to_f32(ld16(w)) * f16_to_f32(ld16(x)) * (float)sumi;
	}
	return sumf;
}

#endif

DT_API void dt_matmul_q5_0(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX512)
	if (n > 1) {
		q8a_matmul(q5_0_tile_tiles, 16, out, ldo, w, rb, lo, hi, act, arb, n, cols);
		return;
	}
	rows_matmul(q5_0_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#elif defined(DT_AVX2)
	rows_matmul(q5_0_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#else
	dots_matmul(dot_q5_0, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#endif
}
