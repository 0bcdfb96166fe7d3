// What the i-quants with sign indices share (iq2.c, iq3.c): ggml's
// ksigns_iq2xs computed, a 32-value group unpacked for the AVX2 row
// kernels, the row kernel itself and the matmul entry points.
#ifndef DOVETAIL_IQ_H
#define DOVETAIL_IQ_H
#include "rows.h"

// ksign is ggml's ksigns_iq2xs[k]: seven sign bits and their parity.
DT_INLINE uint32_t ksign(uint32_t k) { return k | (uint32_t)__builtin_parity(k) << 7; }

#if defined(DT_AVX2)

// iq_group is one 32-value group of a row, ready for the activations:
// magnitudes q (unsigned bytes), neg (0xff where the sign is negative) and
// the scales as 16-bit lanes (the low half's for values 0..15).
typedef struct {
	__m256i q, neg, sc;
} iq_group;

// iq_neg spreads four sign bytes so that byte v of the vector tests bit
// v%8 of sign byte v/8: 0xff where negative.
DT_INLINE __m256i iq_neg(uint32_t signs) {
	const __m256i mask1 = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
	const __m256i mask2 = _mm256_set1_epi64x((int64_t)0x8040201008040201);
	const __m256i s = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)signs), mask1), mask2);
	return _mm256_cmpeq_epi8(s, mask2);
}

// iq_scales is two scales (2s+1) as 16-bit lanes, lo for the group's first
// 16 values.
DT_INLINE __m256i iq_scales(int lo, int hi) {
	return _mm256_set_m128i(_mm_set1_epi16((int16_t)hi), _mm_set1_epi16((int16_t)lo));
}

// IQ_ROW is the row kernel of an i-quant of SIZE bytes a super-block whose
// 32-value groups groups() unpacks, its sums scaled by F at the end (ggml's
// 1/8 or 1/4).
#define IQ_ROW(name, SIZE, groups, F)                                                                           \
	DT_INLINE void name(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb, \
	                    int64_t nb) {                                                                         \
		__m256 acc[4];                                                                                        \
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();                   \
		for (int64_t b = 0; b < nb; b++) {                                                                    \
			const uint8_t *wb = w + b * SIZE;                                                                 \
			iq_group g[8];                                                                                    \
			groups(wb, g);                                                                                    \
			const float d = f16_to_f32(ld16(wb));                                                             \
			_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {                                           \
				const uint8_t *y = act + j * arb + b * Q8_K_SIZE;                                             \
				__m256i sumi = _mm256_setzero_si256();                                                        \
				_Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {                                     \
					const __m256i a = _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * ib));                 \
					const __m256i as = _mm256_sub_epi8(_mm256_xor_si256(a, g[ib].neg), g[ib].neg);            \
					sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(g[ib].q, as), g[ib].sc)); \
				}                                                                                             \
				acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * ldf(y)), _mm256_cvtepi32_ps(sumi), acc[j]);       \
			}                                                                                                 \
		}                                                                                                     \
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) out[j * ldo] = (F) * hsum256(acc[j]);        \
	}

#else

// signed8 is Σ ±grid byte j · q8[j] over an 8-value entry, negated where
// bit j of signs is set.
DT_INLINE int32_t signed8(uint64_t g, uint32_t signs, const int8_t *q8) {
	int32_t s = 0;
	for (int j = 0; j < 8; j++) {
		const int v = (int)((g >> (8 * j)) & 0xff) * q8[j];
		s += signs >> j & 1 ? -v : v;
	}
	return s;
}

#endif

// IQ_MATMUL defines dt_matmul_NAME: the row kernels NAME_rows with SIMD,
// the dot dot_NAME without.
#if defined(DT_AVX2)
#define IQ_MATMUL(name)                                                                                       \
	DT_API void dt_matmul_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi, \
	                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {                \
		rows_matmul(name##_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);                          \
	}
#else
#define IQ_MATMUL(name)                                                                                       \
	DT_API void dt_matmul_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi, \
	                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {                \
		dots_matmul(dot_##name, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);                           \
	}
#endif

#endif
