// Rotary position embedding of one row of heads, with a position's
// precomputed cos and sin (cpu's rope table). Every level computes each
// value as the reference does, x0*c - x1*s and x0*s + x1*c with every
// product rounded (no fused multiply-add), so the levels agree bit for bit.
#include "common.h"

#if defined(DT_AVX512)
DT_INLINE __mmask16 rope_mask(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

// rope_norm_512 turns adjacent pairs: 16 values (8 pairs) a step, cos and
// sin spread to both lanes of a pair and the pair swapped, so that the even
// lane is x0*c + x1*(-s) (= x0*c - x1*s exactly) and the odd one x1*c + x0*s.
static void rope_norm_512(float *v, int64_t pairs, const float *cs, const float *sn) {
	const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
	const __m512 neg_even = _mm512_castsi512_ps(_mm512_set_epi32(0, (int)0x80000000, 0, (int)0x80000000, 0, (int)0x80000000, 0,
	                                                             (int)0x80000000, 0, (int)0x80000000, 0, (int)0x80000000, 0,
	                                                             (int)0x80000000, 0, (int)0x80000000));
	for (int64_t j = 0; j < pairs; j += 8) {
		const int64_t left = pairs - j < 8 ? pairs - j : 8;
		const __mmask8 m8 = (__mmask8)((1u << left) - 1);
		const __mmask16 m = rope_mask(2 * left);
		const __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(m8, cs + j)));
		const __m512 s = _mm512_xor_ps(_mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(m8, sn + j))), neg_even);
		const __m512 x = _mm512_maskz_loadu_ps(m, v + 2 * j);
		const __m512 xs = _mm512_permute_ps(x, 0xB1);
		_mm512_mask_storeu_ps(v + 2 * j, m, _mm512_add_ps(_mm512_mul_ps(x, c), _mm512_mul_ps(xs, s)));
	}
}

// rope_neox_512 turns value j with value j+pairs, 16 pairs a step.
static void rope_neox_512(float *v, int64_t pairs, const float *cs, const float *sn) {
	for (int64_t j = 0; j < pairs; j += 16) {
		const __mmask16 m = rope_mask(pairs - j);
		const __m512 c = _mm512_maskz_loadu_ps(m, cs + j), s = _mm512_maskz_loadu_ps(m, sn + j);
		const __m512 a = _mm512_maskz_loadu_ps(m, v + j), b = _mm512_maskz_loadu_ps(m, v + j + pairs);
		_mm512_mask_storeu_ps(v + j, m, _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)));
		_mm512_mask_storeu_ps(v + j + pairs, m, _mm512_add_ps(_mm512_mul_ps(a, s), _mm512_mul_ps(b, c)));
	}
}
#endif

// dt_rope rotates heads rows of hd values at x in place: pair j (values 2j
// and 2j+1, or with neox j and j+pairs) by the angle whose cos and sin are
// cs[j] and sn[j], for j < pairs (pairs <= hd/2; the values past the
// rotated ones are left as they are).
DT_API void dt_rope(float *x, int64_t heads, int64_t hd, int64_t pairs, int64_t neox, const float *cs, const float *sn) {
	for (int64_t h = 0; h < heads; h++) {
		float *v = x + h * hd;
#if defined(DT_AVX512)
		if (neox)
			rope_neox_512(v, pairs, cs, sn);
		else
			rope_norm_512(v, pairs, cs, sn);
#else
		for (int64_t j = 0; j < pairs; j++) {
			const int64_t a = neox ? j : 2 * j, b = neox ? j + pairs : 2 * j + 1;
			const float x0 = v[a], x1 = v[b];
			v[a] = x0 * cs[j] - x1 * sn[j];
			v[b] = x0 * sn[j] + x1 * cs[j];
		}
#endif
	}
}
