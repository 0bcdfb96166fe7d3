// What the k-quant tiles share (kquants.c, packed_k.c): unpacking Q4_K's
// and Q5_K's scales and Q5_K's fifth bit for 16 rows at once.
#ifndef DOVETAIL_KQUANTS_H
#define DOVETAIL_KQUANTS_H
#include "tile512.h"

#if defined(DT_AVX512)

// q4k_scales unpacks the 6-bit scale and min of sub-block s for every
// row (lane) from the scale bytes 0..3 (A), 4..7 (B) and 8..11 (C).
DT_INLINE void q4k_scales(int s, __m512i A, __m512i B, __m512i C, __m512i *sc, __m512i *m) {
	const __m512i m6 = _mm512_set1_epi32(63), m2 = _mm512_set1_epi32(3), m4 = _mm512_set1_epi32(15);
	if (s < 4) {
		*sc = _mm512_and_si512(_mm512_srli_epi32(A, 8 * s), m6);
		*m = _mm512_and_si512(_mm512_srli_epi32(B, 8 * s), m6);
	} else {
		const int t = s - 4;
		*sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(C, 8 * t), m4),
		                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(A, 8 * t + 6), m2), 4));
		*m = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(C, 8 * t + 4), m4),
		                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(B, 8 * t + 6), m2), 4));
	}
}

// q5_high is 16 in the bytes whose bit of the transposed qh is set.
DT_INLINE __m512i q5_high(__m512i Th, int bit) {
	return _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(Th, _mm512_set1_epi8((char)(1 << bit))), _mm512_set1_epi8(16));
}

#endif
#endif
