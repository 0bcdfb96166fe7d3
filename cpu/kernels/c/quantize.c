// Activation quantizers. They must agree with the Go reference byte for
// byte: an int8 that rounds the other way changes a dot product and, near a
// tie, a greedy token. So every path uses the same float operations in the
// same order; only the data-parallel parts (max, rounding, sums) are SIMD,
// and those are exact.
#include "common.h"

DT_API int64_t dt_abi_version(void) { return DT_ABI_VERSION; }

#if !defined(__F16C__) && !defined(__aarch64__)
float dt_f16_table[65536];

__attribute__((constructor)) static void fill_f16_table(void) {
	for (uint32_t h = 0; h < 65536; h++) dt_f16_table[h] = f16_to_f32_soft((uint16_t)h);
}
#endif

// round_even is round-half-to-even for |v| <= 2^22 (the 1.5*2^23 trick),
// which is what the SIMD conversions do under the default rounding mode.
DT_INLINE int32_t round_even(float v) {
	float t = v + 12582912.0f;
	return (int32_t)(fbits(t) & 0x007fffff) - 0x00400000;
}

// dt_quantize_q8_0: d = amax/127 as f16, id = 127/amax, q = round-even(x*id).
DT_API void dt_quantize_q8_0(uint8_t *dst, const float *x, int64_t k) {
	for (int64_t b = 0; b < k / QK; b++, x += QK, dst += Q8_0_SIZE) {
#if defined(DT_AVX512)
		__m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
		float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
#elif defined(DT_AVX2)
		const __m256 sign = _mm256_set1_ps(-0.0f);
		__m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
		__m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
		                         _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		h = _mm_max_ss(h, _mm_movehdup_ps(h));
		float amax = _mm_cvtss_f32(h);
#else
		float amax = 0;
		for (int i = 0; i < QK; i++) amax = fmaxf(amax, fabsf(x[i]));
#endif
		float d = amax / 127;
		uint16_t dh = f32_to_f16_soft(d);
		memcpy(dst, &dh, 2);
		float id = amax != 0 ? 127 / amax : 0;
#if defined(DT_AVX512)
		__m512 vid = _mm512_set1_ps(id);
		_mm_storeu_si128((__m128i *)(dst + 2), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid))));
		_mm_storeu_si128((__m128i *)(dst + 18), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid))));
#elif defined(DT_AVX2)
		__m256 vid = _mm256_set1_ps(id);
		__m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
		__m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
		// packs work within 128-bit lanes; the permute restores order.
		__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
		p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		_mm256_storeu_si256((__m256i *)(dst + 2), p);
#else
		for (int i = 0; i < QK; i++) dst[2 + i] = (uint8_t)(int8_t)round_even(x[i] * id);
#endif
	}
}

// first_of_magnitude returns the first of a block's QKK values whose
// magnitude is amax (0 if none is), a vector at a time: looked for one
// value at a time it took a third of the quantizer's time.
DT_INLINE float first_of_magnitude(const float *x, float amax) {
	int i = 0;
#if defined(DT_AVX512)
	const __m512 va = _mm512_set1_ps(amax);
	for (; i < QKK; i += 16) {
		const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), va, _CMP_EQ_OQ);
		if (m) return x[i + __builtin_ctz(m)];
	}
#elif defined(DT_AVX2)
	const __m256 va = _mm256_set1_ps(amax), sign = _mm256_set1_ps(-0.0f);
	for (; i < QKK; i += 8) {
		const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), va, _CMP_EQ_OQ));
		if (m) return x[i + __builtin_ctz(m)];
	}
#endif
	for (; i < QKK; i++)
		if (fabsf(x[i]) == amax) return x[i];
	return 0;
}

#if defined(DT_AVX512)
// q8_k_sums sums each 16 of a block's QKK quants into bs: each offset by
// 128 to be unsigned, 8 at a time (vpsadbw), the pairs of those added
// (phaddw) and the offsets taken off. Sixteen reductions of a vector each
// took a third of the quantizer's time; these sums are exact, as theirs.
DT_INLINE void q8_k_sums(int16_t bs[16], const int8_t *qs) {
	const __m512i off = _mm512_set1_epi8(-128);
	__m128i e[4];
	for (int c = 0; c < 4; c++)
		e[c] = _mm512_cvtepi64_epi16(
			_mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(qs + 64 * c), off), _mm512_setzero_si512()));
	const __m128i bias = _mm_set1_epi16(16 * 128);
	_mm_storeu_si128((__m128i *)bs, _mm_sub_epi16(_mm_hadd_epi16(e[0], e[1]), bias));
	_mm_storeu_si128((__m128i *)(bs + 8), _mm_sub_epi16(_mm_hadd_epi16(e[2], e[3]), bias));
}
#endif

// dt_quantize_q8_k is quantize_row_q8_K_ref: the scale comes from the value
// of largest magnitude (the first one on ties), q = min(127,
// round-even(x*(-127/max))), d = 1/iscale, and sums of every 16 quants.
DT_API void dt_quantize_q8_k(uint8_t *dst, const float *x, int64_t k) {
	for (int64_t b = 0; b < k / QKK; b++, x += QKK, dst += Q8_K_SIZE) {
		float amax = 0;
#if defined(DT_AVX512)
		__m512 m = _mm512_setzero_ps();
		for (int i = 0; i < QKK; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
		amax = _mm512_reduce_max_ps(m);
#elif defined(DT_AVX2)
		const __m256 sign = _mm256_set1_ps(-0.0f);
		__m256 m = _mm256_setzero_ps();
		for (int i = 0; i < QKK; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
#else
		for (int i = 0; i < QKK; i++) amax = fmaxf(amax, fabsf(x[i]));
#endif
		if (!(amax > 0)) {
			memset(dst, 0, Q8_K_SIZE);
			continue;
		}
		const float vmax = first_of_magnitude(x, amax);
		float iscale = -127.f / vmax;
		int8_t *qs = (int8_t *)(dst + 4);
		int16_t bs[16];
#if defined(DT_AVX512)
		__m512 vs = _mm512_set1_ps(iscale);
		for (int j = 0; j < 16; j++) {
			__m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * j), vs));
			q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
			_mm_storeu_si128((__m128i *)(qs + 16 * j), _mm512_cvtepi32_epi8(q));
		}
		q8_k_sums(bs, qs);
#elif defined(DT_AVX2)
		const __m256 vs = _mm256_set1_ps(iscale);
		const __m256i top = _mm256_set1_epi32(127);
		for (int j = 0; j < 16; j++) {
			__m256i q0 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * j), vs)), top);
			__m256i q1 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * j + 8), vs)), top);
			// packs work within 128-bit lanes: 0..3 8..11 4..7 12..15 as int16, then bytes in that order.
			__m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xd8);
			__m128i p8 = _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1));
			_mm_storeu_si128((__m128i *)(qs + 16 * j), p8);
			__m256i sum = _mm256_add_epi32(q0, q1);
			__m128i h = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
			h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
			h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
			bs[j] = (int16_t)_mm_cvtsi128_si32(h);
		}
#else
		for (int j = 0; j < 16; j++) {
			int sum = 0;
			for (int i = 0; i < 16; i++) {
				int v = round_even(iscale * x[16 * j + i]);
				v = v < 127 ? v : 127;
				qs[16 * j + i] = (int8_t)v;
				sum += v;
			}
			bs[j] = (int16_t)sum;
		}
#endif
		memcpy(dst + 4 + QKK, bs, sizeof bs);
		float d = 1 / iscale;
		memcpy(dst, &d, 4);
	}
}

DT_API void dt_to_f16(uint16_t *dst, const float *x, int64_t k) {
	int64_t i = 0;
#if defined(DT_AVX512)
	for (; i < k; i += 16) {
		__mmask16 m = k - i >= 16 ? 0xffff : (__mmask16)((1u << (k - i)) - 1);
		__m512 v = _mm512_maskz_loadu_ps(m, x + i);
		__m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		_mm256_mask_storeu_epi16(dst + i, m, h);
		// The hardware keeps NaN payloads; ggml's conversion does not.
		if (_mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q))
			for (int64_t j = i; j < i + 16 && j < k; j++) dst[j] = f32_to_f16_soft(x[j]);
	}
#elif defined(DT_AVX2)
	for (; i + 8 <= k; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		_mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
		if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
			for (int64_t j = i; j < i + 8; j++) dst[j] = f32_to_f16_soft(x[j]);
	}
#endif
	for (; i < k; i++) dst[i] = f32_to_f16_soft(x[i]);
}
