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

#define Q5_0_SIZE 22

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
#if defined(DT_AVX2)
	rows_matmul(q5_0_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#else
	dots_matmul(dot_q5_0, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#endif
}
