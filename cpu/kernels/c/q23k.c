// Q2_K and Q3_K weights × Q8_K activations: the low-bit k-quants of Q2_K,
// Q3_K_S/M/L files. Both keep 16 scales per 256-value super-block (one per
// 16 values) and two bits per value in qs[64]: 32 bytes per 128 values,
// shift 2k of byte l holding value 32k+l. Q2_K's scale byte is a 4-bit
// scale and a 4-bit min, the mins going through the activations' 16-value
// sums as Q4_K's do; Q3_K adds a third bit per value in hmask[32] (bit 4c+k
// of byte l for value 128c+32k+l; the value is 4 less where it is clear)
// and has signed 6-bit scales (biased by 32), packed in 12 bytes.
//
// With SIMD, one weight row against up to four activation rows, products
// through maddubs and the scales through madd; the portable dots elsewhere.
#include "rows.h"

// q3k_scale is the unbiased scale of 16-value group j of a Q3_K block.
DT_INLINE int q3k_scale(const uint8_t *s, int j) {
	const int lo = j < 8 ? s[j] & 0xf : s[j - 8] >> 4, hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
	return (lo | hi << 4) - 32;
}

#if defined(DT_AVX2)

// pair16 is a vector of 16 int16: a eight times, then b eight times, so that
// madd scales the first 16 values of a 32 by a and the rest by b.
DT_INLINE __m256i pair16(int a, int b) {
	return _mm256_set_m128i(_mm_set1_epi16((int16_t)b), _mm_set1_epi16((int16_t)a));
}

// hsum8 adds the eight int32 lanes of v.
DT_INLINE int32_t hsum8(__m256i v) {
	__m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
	h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
	return _mm_cvtsi128_si32(h);
}

DT_INLINE void q2_k_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	__m256 acc[4];
	float accm[4] = {0};
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	const __m256i m3 = _mm256_set1_epi8(3);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q2_K_SIZE;
		const float d = f16_to_f32(ld16(wb + 80)), dmin = f16_to_f32(ld16(wb + 82));
		// The 2-bit values, 32 per vector in value order, and their scales.
		__m256i q[8], sc[8];
		#pragma GCC unroll 2
		for (int c = 0; c < 2; c++) {
			const __m256i raw = _mm256_loadu_si256((const __m256i *)(wb + 16 + 32 * c));
			#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				q[4 * c + k] = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * k), m3);
				sc[4 * c + k] = pair16(wb[8 * c + 2 * k] & 0xf, wb[8 * c + 2 * k + 1] & 0xf);
			}
		}
		const __m256i mins = _mm256_cvtepu8_epi16(_mm_srli_epi16(_mm_and_si128(_mm_loadu_si128((const __m128i *)wb), _mm_set1_epi8((char)0xf0)), 4));
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m256i sumi = _mm256_setzero_si256();
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++) {
				const __m256i p = _mm256_maddubs_epi16(q[s], _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * s)));
				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sc[s]));
			}
			const float dy = ldf(y);
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(sumi), acc[j]);
			const int32_t m = hsum8(_mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)(y + 4 + QKK))));
			accm[j] += dmin * dy * (float)m;
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]) - accm[j];
}

DT_INLINE void q3_k_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	__m256 acc[4];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4), zero = _mm256_setzero_si256();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q3_K_SIZE;
		const float d = f16_to_f32(ld16(wb + 108));
		const __m256i hm = _mm256_loadu_si256((const __m256i *)wb);
		// The 16 6-bit scales less 32 as bytes at once (ggml's kmask
		// shuffle, q3k_scale's values), then a pair per 32 values.
		uint32_t aux[3];
		memcpy(aux, wb + 96, 12);
		const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f;
		const __m128i sc8 = _mm_sub_epi8(_mm_set_epi32((int)(((aux[1] >> 4) & k2) | (((aux[2] >> 6) & k1) << 4)),
		                                               (int)(((aux[0] >> 4) & k2) | (((aux[2] >> 4) & k1) << 4)),
		                                               (int)((aux[1] & k2) | (((aux[2] >> 2) & k1) << 4)),
		                                               (int)((aux[0] & k2) | ((aux[2] & k1) << 4))),
		                                 _mm_set1_epi8(32));
		// The 3-bit values (-4..3) as |v| and v, and their scales.
		__m256i q[8], aq[8], sc[8];
		#pragma GCC unroll 2
		for (int c = 0; c < 2; c++) {
			const __m256i raw = _mm256_loadu_si256((const __m256i *)(wb + 32 + 32 * c));
			#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				const int s = 4 * c + k;
				const __m256i bit = _mm256_set1_epi8((char)(1 << s));
				const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), zero);
				q[s] = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(raw, 2 * k), m3), _mm256_and_si256(clear, four));
				aq[s] = _mm256_sign_epi8(q[s], q[s]);
				sc[s] = i8_pair16(sc8, s);
			}
		}
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m256i sumi = _mm256_setzero_si256();
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++) {
				const __m256i ys = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(y + 4 + 32 * s)), q[s]);
				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(aq[s], ys), sc[s]));
			}
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * ldf(y)), _mm256_cvtepi32_ps(sumi), acc[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]);
}

ROW_FNS(q2_k_row)
ROW_FNS(q3_k_row)

#else

// The portable dots mirror quant.DotQ2_KQ8_K's and quant.DotQ3_KQ8_K's
// integer sums.
static float dot_q2_k(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += Q2_K_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		int32_t isum = 0, summs = 0;
		for (int j = 0; j < 16; j++) {
			int16_t bs;
			memcpy(&bs, x + 4 + QKK + 2 * j, 2);
			summs += bs * (w[j] >> 4);
			const uint8_t *q2 = w + 16 + 32 * (j / 8);
			const int shift = 2 * (j % 8 / 2), half = 16 * (j % 2);
			int32_t s = 0;
			for (int l = 0; l < 16; l++) s += q8[16 * j + l] * ((q2[half + l] >> shift) & 3);
			isum += (w[j] & 0xf) * s;
		}
		const float dy = ldf(x);
		sumf += dy * f16_to_f32(ld16(w + 80)) * (float)isum - dy * f16_to_f32(ld16(w + 82)) * (float)summs;
	}
	return sumf;
}

static float dot_q3_k(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += Q3_K_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		int32_t isum = 0;
		for (int j = 0; j < 16; j++) {
			int32_t s = 0;
			for (int l = 0; l < 16; l++) {
				const int i = 16 * j + l, c = i / 128, k = i % 128 / 32, e = i % 32;
				int v = (w[32 + 32 * c + e] >> (2 * k)) & 3;
				if (!(w[e] & (1 << (4 * c + k)))) v -= 4;
				s += v * q8[i];
			}
			isum += q3k_scale(w + 96, j) * s;
		}
		sumf += f16_to_f32(ld16(w + 108)) * ldf(x) * (float)isum;
	}
	return sumf;
}

#endif

DT_API void dt_matmul_q2_k(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX2)
	rows_matmul(q2_k_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#else
	dots_matmul(dot_q2_k, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#endif
}

DT_API void dt_matmul_q3_k(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX2)
	rows_matmul(q3_k_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#else
	dots_matmul(dot_q3_k, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#endif
}
