// Elementwise kernels: RMS norm and SwiGLU's silu(gate)*up.
#include "common.h"

// dt_rmsnorm: the sum of squares in double (each square of a float is exact
// there, so only the order of the additions differs from the reference),
// then out = (x*scale)*weight in float32, in the reference's order.
DT_API void dt_rmsnorm(float *out, const float *x, const float *wt, int64_t n, int64_t cols, uint32_t eps_bits) {
	const float eps = bitsf(eps_bits);
	for (int64_t j = 0; j < n; j++, x += cols, out += cols) {
		double ss = 0;
		int64_t i = 0;
#if defined(DT_AVX512)
		__m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
		for (; i + 16 <= cols; i += 16) {
			__m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(x + i)), hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
			a0 = _mm512_fmadd_pd(lo, lo, a0);
			a1 = _mm512_fmadd_pd(hi, hi, a1);
		}
		ss = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
#elif defined(DT_AVX2)
		__m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
		for (; i + 8 <= cols; i += 8) {
			__m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
			a0 = _mm256_fmadd_pd(lo, lo, a0);
			a1 = _mm256_fmadd_pd(hi, hi, a1);
		}
		__m256d a = _mm256_add_pd(a0, a1);
		__m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
		ss = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
#endif
		for (; i < cols; i++) ss += (double)x[i] * (double)x[i];
		const float scale = (float)(1 / sqrt(ss / (double)cols + (double)eps));
		i = 0;
#if defined(DT_AVX512)
		const __m512 vs = _mm512_set1_ps(scale);
		for (; i + 16 <= cols; i += 16)
			_mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(wt + i)));
#elif defined(DT_AVX2)
		const __m256 vs = _mm256_set1_ps(scale);
		for (; i + 8 <= cols; i += 8)
			_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(wt + i)));
#endif
		for (; i < cols; i++) out[i] = x[i] * scale * wt[i];
	}
}

// dt_silu_mul: out = gate/(1+exp(-gate))*up. Only exp differs from the
// reference (by an ulp or two); the division and product are IEEE.
DT_API void dt_silu_mul(float *out, const float *gate, const float *up, int64_t k) {
	int64_t i = 0;
#if defined(DT_AVX512)
	const __m512 one = _mm512_set1_ps(1);
	for (; i + 16 <= k; i += 16) {
		__m512 g = _mm512_loadu_ps(gate + i);
		__m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
		_mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
	}
#elif defined(DT_AVX2)
	const __m256 one = _mm256_set1_ps(1);
	for (; i + 8 <= k; i += 8) {
		__m256 g = _mm256_loadu_ps(gate + i);
		__m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
	}
#endif
	for (; i < k; i++) out[i] = gate[i] / (1 + expf(-gate[i])) * up[i];
}
