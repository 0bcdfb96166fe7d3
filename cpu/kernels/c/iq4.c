// IQ4_NL weights × Q8_0 activations and IQ4_XS weights × Q8_K activations.
// Both store 4-bit indices into one table of int8 values (ggml's
// kvalues_iq4nl); index j of 32 values sits in the low nibble of qs[j] and
// index j+16 in the high one. IQ4_NL: blocks of 32 with an f16 scale (18
// bytes). IQ4_XS: super-blocks of 256 with an f16 scale, and per 32 values a
// 6-bit scale biased by 32 (low four bits in scales_l[4], high two in
// scales_h), then qs[128] (136 bytes).
//
// With SIMD, a byte shuffle looks the indices up in the table (ggml's
// AVX2 kernels do the same), and the signed products go through
// maddubs with the sign moved onto the activations: |v|·sign(v)·a. One
// weight row is unpacked once for up to four activation rows. At AVX-512,
// IQ4_XS runs in the k-quants' tiles (kquants.c).
#include "rows.h"

// iq4_xs_scale is the unbiased scale of 32-value group ib of an IQ4_XS block.
DT_INLINE int iq4_xs_scale(const uint8_t *b, int ib) {
	const int lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf, hi = (ld16(b + 2) >> (2 * ib)) & 3;
	return (lo | hi << 4) - 32;
}

#if defined(DT_AVX512)
void dt_iq4_xs_matmul512(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                         const uint8_t *act, int64_t arb, int64_t n, int64_t cols);
#endif

#if defined(DT_AVX2)

// iq4_lookup turns 16 bytes of indices into the 32 int8 values they name.
DT_INLINE __m256i iq4_lookup(const uint8_t *qs, __m128i table) {
	const __m128i m4 = _mm_set1_epi8(0x0f), bits = _mm_loadu_si128((const __m128i *)qs);
	const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(bits, m4));
	const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bits, 4), m4));
	return _mm256_set_m128i(hi, lo);
}

// iq4_dot32 is the eight int32 partial sums of 32 int8 products v·a; no
// table value is 0 or -128, so |v| fits maddubs' unsigned side and each
// pair sum (at most 2·127·127) an int16.
DT_INLINE __m256i iq4_dot32(__m256i absv, __m256i v, const uint8_t *a) {
	const __m256i av = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a), v);
#if defined(DT_AVX512)
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), absv, av);
#else
	return _mm256_madd_epi16(_mm256_maddubs_epi16(absv, av), _mm256_set1_epi16(1));
#endif
}

// iq4_dot32_scaled is iq4_dot32 times a 16-bit scale, which madd applies
// for free.
DT_INLINE __m256i iq4_dot32_scaled(__m256i absv, __m256i v, const uint8_t *a, __m256i scale) {
	const __m256i av = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a), v);
	return _mm256_madd_epi16(_mm256_maddubs_epi16(absv, av), scale);
}

DT_INLINE void iq4_nl_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                          int64_t nb) {
	const __m128i table = iq4_lut();
	__m256 acc[4];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * IQ4_NL_SIZE;
		const __m256i v = iq4_lookup(wb + 2, table), absv = _mm256_sign_epi8(v, v);
		const float d = f16_to_f32(ld16(wb));
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_0_SIZE;
			const __m256i s = iq4_dot32(absv, v, y + 2);
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * f16_to_f32(ld16(y))), _mm256_cvtepi32_ps(s), acc[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]);
}

DT_INLINE void iq4_xs_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                          int64_t nb) {
	const __m128i table = iq4_lut();
	__m256 acc[4];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * IQ4_XS_SIZE;
		__m256i v[8], absv[8], sc[8];
		#pragma GCC unroll 8
		for (int s = 0; s < 8; s++) {
			v[s] = iq4_lookup(wb + 8 + 16 * s, table);
			absv[s] = _mm256_sign_epi8(v[s], v[s]);
			sc[s] = _mm256_set1_epi16((int16_t)iq4_xs_scale(wb, s));
		}
		const float d = f16_to_f32(ld16(wb));
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m256i sumi = _mm256_setzero_si256();
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++)
				sumi = _mm256_add_epi32(sumi, iq4_dot32_scaled(absv[s], v[s], y + 4 + 32 * s, sc[s]));
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * ldf(y)), _mm256_cvtepi32_ps(sumi), acc[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]);
}

ROW_FNS(iq4_nl_row)
#if !defined(DT_AVX512)
ROW_FNS(iq4_xs_row)
#endif

#else

// The portable dots mirror quant.DotIQ4_NLQ8_0 and quant.DotIQ4_XSQ8_K's
// integer sums (the float order may differ within the kernels' tolerance).
static float dot_iq4_nl(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += IQ4_NL_SIZE, x += Q8_0_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 2);
		int32_t sumi = 0;
		for (int l = 0; l < 16; l++)
			sumi += dt_iq4_values[w[2 + l] & 0xf] * q8[l] + dt_iq4_values[w[2 + l] >> 4] * q8[l + 16];
		sumf += f16_to_f32(ld16(x)) * f16_to_f32(ld16(w)) * (float)sumi;
	}
	return sumf;
}

static float dot_iq4_xs(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += IQ4_XS_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		const uint8_t *qs = w + 8;
		int32_t sumi = 0;
		for (int s = 0; s < 8; s++) {
			int32_t si = 0;
			for (int l = 0; l < 16; l++)
				si += dt_iq4_values[qs[16 * s + l] & 0xf] * q8[32 * s + l] + dt_iq4_values[qs[16 * s + l] >> 4] * q8[32 * s + l + 16];
			sumi += iq4_xs_scale(w, s) * si;
		}
		sumf += f16_to_f32(ld16(w)) * ldf(x) * (float)sumi;
	}
	return sumf;
}

#endif

DT_API void dt_matmul_iq4_nl(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX2)
	rows_matmul(iq4_nl_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#else
	dots_matmul(dot_iq4_nl, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#endif
}

DT_API void dt_matmul_iq4_xs(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX512)
	dt_iq4_xs_matmul512(out, ldo, w, rb, lo, hi, act, arb, n, cols);
#elif defined(DT_AVX2)
	rows_matmul(iq4_xs_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#else
	dots_matmul(dot_iq4_xs, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#endif
}
