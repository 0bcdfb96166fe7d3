// What the k-quant tiles share (kquants.c, packed_k.c): unpacking Q4_K's
// and Q5_K's scales, Q5_K's fifth bit, Q6_K's quants and IQ4_XS's values
// for 16 rows at once.
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

// q6_quant builds, for half h of a Q6_K super-block, the unsigned 6-bit
// quants of one quarter (qi: 0..3, 32 values) for every row, from the
// transposed low-bit bytes (Tq: ql[0..31] for quarters 0 and 2, ql[32..63]
// for 1 and 3) and high-bit bytes Th: the low nibbles of Tq (quarters 0,
// 1) or the high ones (2, 3), and bits 2qi, 2qi+1 of Th moved to 4, 5. The
// shifts take their counts from a register, so that qi may be known only
// at run time (the packed tile's loop over sub-blocks).
DT_INLINE __m512i q6_quant(int qi, __m512i Tq, __m512i Th) {
	const __m128i lo = _mm_cvtsi32_si128(qi < 2 ? 0 : 4), hl = _mm_cvtsi32_si128(qi < 3 ? 4 - 2 * qi : 0),
	              hr = _mm_cvtsi32_si128(qi < 3 ? 0 : 2);
	const __m512i l = _mm512_and_si512(_mm512_srl_epi16(Tq, lo), _mm512_set1_epi8(0x0f));
	const __m512i h = _mm512_srl_epi16(_mm512_sll_epi16(Th, hl), hr);
	return _mm512_or_si512(l, _mm512_and_si512(h, _mm512_set1_epi8(0x30)));
}

// iq4_table is IQ4_NL's table of values plus 128, in every 128-bit lane.
DT_INLINE __m512i iq4_table(void) {
	return _mm512_broadcast_i32x4(iq4_lut_u());
}

// iq4_xs_weights looks up IQ4_XS's values (plus 128) for one sub-block of
// 16 rows from a transposed 32-byte chunk of qs: bytes 0..15 (T[0..3]) are
// sub-block 2k, their low nibbles its values 0..15 and high ones 16..31;
// bytes 16..31 (T[4..7]) are sub-block 2k+1. Ws comes in dot8's order.
DT_INLINE void iq4_xs_weights(const __m512i T[8], int half, __m512i table, __m512i Ws[8]) {
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		Ws[g] = _mm512_shuffle_epi8(table, _mm512_and_si512(T[4 * half + g], m4));
		Ws[4 + g] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(T[4 * half + g], 4), m4));
	}
}

#endif
#endif
