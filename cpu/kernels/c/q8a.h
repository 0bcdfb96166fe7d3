// What the packed products (AVX-512's tiles, AVX2's packed groups) need of
// each Q8_0 activation block, computed once per product: its scale and the
// start value of its integer dot, which takes back the constant the
// unsigned weights are offset by.
#ifndef DOVETAIL_Q8A_H
#define DOVETAIL_Q8A_H
#include "common.h"

#if defined(DT_AVX2)

// q8a is what a tile needs of one Q8_0 activation block: its scale and,
// for weights offset by a constant, the accumulator start -off*sum(q); for
// weights with a per-block minimum (Q4_1, Q5_1: value q*d + m), whose
// block dot is d*dy*sum(q*y) + m*dy*sum(y), the second term's dy*sum(y).
typedef struct {
	float d;
	union {
		int32_t c;
		float s;
	};
} q8a;

// q8a_prep fills tab from blocks [b0, b0+nbc) of the n activation rows,
// row j's entry of block b0+b at tab[j*sj + b*sb], for weights offset by
// off, or with a minimum (min: s rather than c).
__attribute__((unused)) static void q8a_prep(q8a *tab, int64_t sj, int64_t sb, const uint8_t *act, int64_t arb, int64_t n,
                                             int64_t b0, int64_t nbc, int32_t off, int min) {
	const __m256i x80 = _mm256_set1_epi8((char)0x80);
	for (int64_t j = 0; j < n; j++) {
		const uint8_t *x = act + j * arb + b0 * Q8_0_SIZE;
		for (int64_t b = 0; b < nbc; b++, x += Q8_0_SIZE) {
			__m256i q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + 2)), x80);
			__m256i s = _mm256_sad_epu8(q, _mm256_setzero_si256()); // 4 sums of q+128
			__m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
			int32_t sum = (int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
			const float d = f16_to_f32(ld16(x));
			q8a *e = tab + j * sj + b * sb;
			e->d = d;
			if (min)
				e->s = d * (float)sum;
			else
				e->c = -off * sum;
		}
	}
}

#endif
#endif
