// Q4_1 and Q5_1 weights × Q8_0 activations: Q4_0's and Q5_0's layouts
// with an offset, value = q·d + m for q in 0..15 (Q4_1: f16 d, f16 m, 16
// bytes of nibbles) or 0..31 (Q5_1: f16 d, f16 m, a uint32 of fifth bits,
// 16 bytes of nibbles). A block's dot is d·dy·Σ q·y + m·dy·Σ y; ggml takes
// dy·Σ y from its Q8_1 activations' f16 s, these kernels sum it in the
// same pass (the integer sums are exact either way).
//
// With SIMD, one weight row against up to four activation rows: the
// values are unsigned, so maddubs takes them as they are; the portable
// dot elsewhere.
#include "rows.h"

#if defined(DT_AVX2)

// q4_1_values unpacks 16 bytes of nibbles as 32 uint8 values in 0..15.
DT_INLINE __m256i q4_1_values(const uint8_t *qs) {
	const __m128i bits = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bits, 4), m4), _mm_and_si128(bits, m4));
}

// q5_1_values adds each value's fifth bit (bit i of qh) as 16.
DT_INLINE __m256i q5_1_values(const uint8_t *wb) {
	const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
	// Byte i of hb is byte i/8 of qh; ORing every bit but i%8 and comparing
	// with all ones leaves 0xff where bit i of qh is set (as in q5_0.c).
	__m256i hb = _mm256_shuffle_epi8(_mm256_set1_epi32((int)ld32(wb + 4)), shuf);
	hb = _mm256_cmpeq_epi8(_mm256_or_si256(hb, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
	return _mm256_or_si256(q4_1_values(wb + 8), _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
}

// offset_row is the row kernel of both: five selects Q5_1.
DT_INLINE void offset_row(const int NT, const int five, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act,
                          int64_t arb, int64_t nb) {
	__m256 acc[4], accm[4];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = accm[j] = _mm256_setzero_ps();
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	const int64_t bs = five ? Q5_1_SIZE : Q4_1_SIZE;
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * bs;
		const __m256i v = five ? q5_1_values(wb) : q4_1_values(wb + 4);
		const float d = f16_to_f32(ld16(wb)), m = f16_to_f32(ld16(wb + 2));
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_0_SIZE;
			const __m256i yv = _mm256_loadu_si256((const __m256i *)(y + 2));
			const float dy = f16_to_f32(ld16(y));
			const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(v, yv), ones16);
			const __m256i sy = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, yv), ones16);
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(s), acc[j]);
			accm[j] = _mm256_fmadd_ps(_mm256_set1_ps(m * dy), _mm256_cvtepi32_ps(sy), accm[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(_mm256_add_ps(acc[j], accm[j]));
}

DT_INLINE void q4_1_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	offset_row(NT, 0, out, ldo, w, act, arb, nb);
}

DT_INLINE void q5_1_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	offset_row(NT, 1, out, ldo, w, act, arb, nb);
}

ROW_FNS(q4_1_row)
ROW_FNS(q5_1_row)

#else

// dot_offset mirrors quant.DotQ4_1Q8_0 and quant.DotQ5_1Q8_0's sums.
static float dot_offset(const int five, const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	const int64_t bs = five ? Q5_1_SIZE : Q4_1_SIZE;
	for (int64_t b = 0; b < nb; b++, w += bs, x += Q8_0_SIZE) {
		const uint32_t qh = five ? (uint32_t)ld32(w + 4) : 0;
		const uint8_t *qs = w + (five ? 8 : 4);
		const int8_t *q8 = (const int8_t *)(x + 2);
		int32_t sumi = 0, sumy = 0;
		for (int j = 0; j < QK / 2; j++) {
			const int x0 = (qs[j] & 0xf) | (int)((qh >> j & 1) << 4);
			const int x1 = (qs[j] >> 4) | (int)((qh >> (j + 16) & 1) << 4);
			sumi += x0 * q8[j] + x1 * q8[j + 16];
			sumy += q8[j] + q8[j + 16];
		}
		const float dy = f16_to_f32(ld16(x));
		sumf += f16_to_f32(ld16(w)) * dy * (float)sumi + f16_to_f32(ld16(w + 2)) * dy * (float)sumy;
	}
	return sumf;
}

static float dot_q4_1(const uint8_t *w, const uint8_t *x, int64_t nb) { return dot_offset(0, w, x, nb); }
static float dot_q5_1(const uint8_t *w, const uint8_t *x, int64_t nb) { return dot_offset(1, w, x, nb); }

#endif

DT_API void dt_matmul_q4_1(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX2)
	rows_matmul(q4_1_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#else
	dots_matmul(dot_q4_1, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#endif
}

DT_API void dt_matmul_q5_1(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX2)
	rows_matmul(q5_1_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#else
	dots_matmul(dot_q5_1, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#endif
}
