// Q8_0 weights × Q8_0 activations: per 32-value block an exact int8 dot,
// scaled by both blocks' f16 scales.
#include "rows.h"
#include "tile512.h"

#if defined(DT_AVX512)

DT_INLINE void q8_0_tile(const int NT, const uint8_t *w, int64_t rb, int rows, int64_t b0, int64_t nbc,
                         const uint8_t *act, int64_t arb, const q8a *tab, int64_t ts, float *out, int64_t ldo,
                         int add) {
	const uint8_t *p[16];
	const __m512i vidx = tile_rows(w, rb, rows, p);
	const __m512i x80 = _mm512_set1_epi8((char)0x80);
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nbc; b++) {
		const int64_t o = (b0 + b) * Q8_0_SIZE;
		__m512i W[8];
		prefetch_rows(p, o, 1);
		transpose32(p, o + 2, W);
		#pragma GCC unroll 16
		for (int g = 0; g < 8; g++) W[g] = _mm512_xor_si512(W[g], x80); // w+128: unsigned for vpdpbusd
		const __m512 dw = f16_lanes(w, vidx, o);
		acc_block(NT, acc, W, dw, act + o + 2, arb, tab, ts, b);
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], add);
}

TILE_FNS(q8_0_tile)

#elif defined(DT_AVX2)

// One weight row against up to four activation rows: |w| and the weight
// loads are shared; the sign trick makes maddubs (unsigned × signed) exact
// for signed × signed, as in ggml.
DT_INLINE void q8_0_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        const float *dx, int64_t nb) {
	__m256 acc[4];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	const __m256i ones = _mm256_set1_epi16(1);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q8_0_SIZE;
		const __m256i qw = _mm256_loadu_si256((const __m256i *)(wb + 2));
		const __m256i aw = _mm256_sign_epi8(qw, qw);
		const float dw = f16_to_f32(ld16(wb));
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) {
			const uint8_t *xb = act + j * arb + b * Q8_0_SIZE;
			__m256i sx = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(xb + 2)), qw);
			__m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones);
			const float dxj = dx ? dx[j * nb + b] : f16_to_f32(ld16(xb));
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dxj), _mm256_cvtepi32_ps(dot), acc[j]);
		}
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]);
}

DXROW_FNS(q8_0_row)

#elif defined(DT_NEON)

// Four weight rows × up to eight activation rows: the rows' groups are
// transposed so that vdotq_laneq_s32 advances four row dots per
// instruction with an activation group picked by lane, as the AVX-512
// tiles do with sixteen.
DT_INLINE void q8_0_neon(const int NT, float *out, int64_t ldo, const uint8_t *w, int64_t rb, const uint8_t *act,
                         int64_t arb, int64_t nb) {
	float32x4_t acc[8];
	for (int j = 0; j < NT; j++) acc[j] = vdupq_n_f32(0);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *w0 = w + b * Q8_0_SIZE, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
		int8x16_t G[8];
		neon_transpose4(vld1q_s8((const int8_t *)w0 + 2), vld1q_s8((const int8_t *)w1 + 2), vld1q_s8((const int8_t *)w2 + 2),
		                vld1q_s8((const int8_t *)w3 + 2), G);
		neon_transpose4(vld1q_s8((const int8_t *)w0 + 18), vld1q_s8((const int8_t *)w1 + 18),
		                vld1q_s8((const int8_t *)w2 + 18), vld1q_s8((const int8_t *)w3 + 18), G + 4);
		const float32x4_t dw = neon_f16x4(w0, w1, w2, w3);
		for (int j = 0; j < NT; j++) {
			const uint8_t *x = act + j * arb + b * Q8_0_SIZE;
			int32x4_t s = neon_dot8(G, x + 2);
			acc[j] = vfmaq_f32(acc[j], vcvtq_f32_s32(s), vmulq_n_f32(dw, f16_to_f32(ld16(x))));
		}
	}
	for (int j = 0; j < NT; j++) vst1q_f32(out + j * ldo, acc[j]);
}

static float dot_q8_0(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sum = 0;
	for (int64_t b = 0; b < nb; b++, w += Q8_0_SIZE, x += Q8_0_SIZE) {
		const int8x16_t w0 = vld1q_s8((const int8_t *)w + 2), w1 = vld1q_s8((const int8_t *)w + 18);
		int32x4_t s = vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8((const int8_t *)x + 2));
		s = vdotq_s32(s, w1, vld1q_s8((const int8_t *)x + 18));
		sum += (float)vaddvq_s32(s) * (f16_to_f32(ld16(w)) * f16_to_f32(ld16(x)));
	}
	return sum;
}

#else

static float dot_q8_0(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sum = 0;
	for (int64_t b = 0; b < nb; b++, w += Q8_0_SIZE, x += Q8_0_SIZE) {
		const int8_t *qw = (const int8_t *)(w + 2), *qx = (const int8_t *)(x + 2);
		int32_t s = 0;
		for (int i = 0; i < QK; i++) s += qw[i] * qx[i];
		sum += (float)s * (f16_to_f32(ld16(w)) * f16_to_f32(ld16(x)));
	}
	return sum;
}

#endif

DT_API void dt_matmul_q8_0(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX512)
	q8a_matmul(q8_0_tile_tiles, 128, out, ldo, w, rb, lo, hi, act, arb, n, cols);
#elif defined(DT_AVX2)
	dx_rows_matmul(q8_0_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#elif defined(DT_NEON)
	int64_t r = lo;
	for (; r + 4 <= hi; r += 4)
		for (int64_t j = 0; j < n; j += 8) {
			float *o = out + j * ldo + r;
			const uint8_t *a = act + j * arb, *wr = w + r * rb;
			switch (n - j < 8 ? n - j : 8) {
			case 1: q8_0_neon(1, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 2: q8_0_neon(2, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 3: q8_0_neon(3, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 4: q8_0_neon(4, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 5: q8_0_neon(5, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 6: q8_0_neon(6, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 7: q8_0_neon(7, o, ldo, wr, rb, a, arb, cols / QK); break;
			default: q8_0_neon(8, o, ldo, wr, rb, a, arb, cols / QK); break;
			}
		}
	for (; r < hi; r++)
		for (int64_t j = 0; j < n; j++) out[j * ldo + r] = dot_q8_0(w + r * rb, act + j * arb, cols / QK);
#else
	for (int64_t r = lo; r < hi; r++)
		for (int64_t j = 0; j < n; j++) out[j * ldo + r] = dot_q8_0(w + r * rb, act + j * arb, cols / QK);
#endif
}
