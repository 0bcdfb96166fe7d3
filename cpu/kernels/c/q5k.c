// Q5_K weights × Q8_K activations: Q4_K's super-block (d, dmin, the 6-bit
// scales and mins of eight 32-value sub-blocks) with a fifth bit per value
// in qh[32] (bit 2j of qh[l] for value 64j+l, bit 2j+1 for value 64j+32+l).
// The mins go through the activations' 16-value sums, as for Q4_K.
//
// At AVX-512, Q4_K's tiles with the fifth bit (kquants.c); at AVX2, one
// weight row against up to four activation rows after ggml's AVX2 kernel;
// the portable dot elsewhere.
#include "rows.h"

#if defined(DT_AVX512)

void dt_q5_k_matmul512(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi, const uint8_t *act,
                       int64_t arb, int64_t n, int64_t cols);

#elif defined(DT_AVX2)

DT_INLINE void q5_k_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	__m256 acc[4], accm[4];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps(), accm[j] = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0x0f), m16 = _mm256_set1_epi8(0x10);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q5_K_SIZE;
		const float d = f16_to_f32(ld16(wb)), dmin = f16_to_f32(ld16(wb + 2));
		__m128i sc8;
		__m256i mins;
		k4_scales(wb + 4, &sc8, &mins);
		__m256i scale[8];
		k4_scale_lanes(sc8, scale);
		// The 5-bit quants of the super-block, 32 per vector: q[s] is
		// sub-block s.
		const __m256i hb = _mm256_loadu_si256((const __m256i *)(wb + 16));
		__m256i q[8];
		#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			const __m256i raw = _mm256_loadu_si256((const __m256i *)(wb + 48 + 32 * k));
			const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * k))), b1 = _mm256_set1_epi8((char)(2 << (2 * k)));
			const __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b0), b0), m16);
			const __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b1), b1), m16);
			q[2 * k] = _mm256_or_si256(_mm256_and_si256(raw, m4), h0);
			q[2 * k + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), h1);
		}
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m256i sumi = _mm256_setzero_si256();
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++) {
				// 5-bit × int8 pairs stay within int16: 2·31·128 < 2^15.
				__m256i p = _mm256_maddubs_epi16(q[s], _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * s)));
				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale[s]));
			}
			const float dy = ldf(y);
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(sumi), acc[j]);
			const __m256i mi = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)(y + 4 + QKK)));
			accm[j] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * dy), _mm256_cvtepi32_ps(mi), accm[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]) - hsum256(accm[j]);
}

ROW_FNS(q5_k_row)

#else

// dot_q5_k mirrors quant.DotQ5_KQ8_K's integer sums (the float order may
// differ within the kernels' tolerance).
static float dot_q5_k(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += Q5_K_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		const uint8_t *qh = w + 16;
		int32_t sumi = 0, mins = 0;
		for (int j = 0; j < 4; j++) {
			uint8_t sc1, m1, sc2, m2;
			scale_min_k4(2 * j, w + 4, &sc1, &m1);
			scale_min_k4(2 * j + 1, w + 4, &sc2, &m2);
			const uint8_t *ql = w + 48 + 32 * j;
			int32_t s1 = 0, s2 = 0;
			for (int l = 0; l < 32; l++) {
				const int h = qh[l] >> (2 * j);
				s1 += ((ql[l] & 0xf) | ((h & 1) << 4)) * q8[64 * j + l];
				s2 += ((ql[l] >> 4) | (((h >> 1) & 1) << 4)) * q8[64 * j + 32 + l];
			}
			sumi += sc1 * s1 + sc2 * s2;
			int16_t bs[4];
			memcpy(bs, x + 4 + QKK + 8 * j, 8);
			mins += m1 * (bs[0] + bs[1]) + m2 * (bs[2] + bs[3]);
		}
		const float dy = ldf(x);
		sumf += f16_to_f32(ld16(w)) * dy * (float)sumi - f16_to_f32(ld16(w + 2)) * dy * (float)mins;
	}
	return sumf;
}

#endif

DT_API void dt_matmul_q5_k(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX512)
	dt_q5_k_matmul512(out, ldo, w, rb, lo, hi, act, arb, n, cols);
#elif defined(DT_AVX2)
	rows_matmul(q5_k_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#else
	dots_matmul(dot_q5_k, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#endif
}
