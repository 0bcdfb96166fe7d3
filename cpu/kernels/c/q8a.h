// What the packed products (AVX-512's tiles, AVX2's packed groups) need of
// each Q8_0 activation block, computed once per product: its scale and the
// start value of its integer dot, which takes back the constant the
// unsigned weights are offset by.
#ifndef DOVETAIL_Q8A_H
#define DOVETAIL_Q8A_H
#include "common.h"

#if defined(DT_AVX2)

#define PK_TILE_PREP 256 // blocks q8a_prep_tile prepares at a time

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

// q8a_prep fills tab (n rows of nbc entries) from blocks [b0, b0+nbc) of
// the n activation rows, for weights offset by off, or with a minimum
// (min: s rather than c).
__attribute__((unused)) static void q8a_prep(q8a *tab, const uint8_t *act, int64_t arb, int64_t n, int64_t b0, int64_t nbc, int32_t off,
                                             int min) {
	const __m256i x80 = _mm256_set1_epi8((char)0x80);
	for (int64_t j = 0; j < n; j++) {
		const uint8_t *x = act + j * arb + b0 * Q8_0_SIZE;
		for (int64_t b = 0; b < nbc; b++, x += Q8_0_SIZE) {
			__m256i q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + 2)), x80);
			__m256i s = _mm256_sad_epu8(q, _mm256_setzero_si256()); // 4 sums of q+128
			__m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
			int32_t sum = (int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
			const float d = f16_to_f32(ld16(x));
			tab[j * nbc + b].d = d;
			if (min)
				tab[j * nbc + b].s = d * (float)sum;
			else
				tab[j * nbc + b].c = -off * sum;
		}
	}
}

// q8a_prep_tile fills tt, a tile's table laid out block after block (row
// j's entry of block b at tt[b*nt + j]), from the nt activation rows at
// act (blocks [0, nb)).
__attribute__((unused)) static void q8a_prep_tile(q8a *tt, const uint8_t *act, int64_t arb, int64_t nt, int64_t nb, int32_t off,
                                                  int min) {
	q8a row[PK_TILE_PREP];
	for (int64_t b0 = 0; b0 < nb; b0 += PK_TILE_PREP) {
		const int64_t nbc = nb - b0 < PK_TILE_PREP ? nb - b0 : PK_TILE_PREP;
		for (int64_t j = 0; j < nt; j++) {
			q8a_prep(row, act + j * arb, arb, 1, b0, nbc, off, min);
			for (int64_t b = 0; b < nbc; b++) tt[(b0 + b) * nt + j] = row[b];
		}
	}
}

#endif
#endif
