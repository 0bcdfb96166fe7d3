// Q4_0 weights × Q8_0 activations. A Q4_0 block is an f16 scale and 16
// bytes of nibbles: the low nibbles are values 0..15, the high ones 16..31,
// each stored as q+8.
#include "rows.h"
#include "tile512.h"

#if defined(DT_AVX512)

DT_INLINE void q4_0_tile(const int NT, const uint8_t *w, int64_t rb, int rows, int64_t b0, int64_t nbc,
                         const uint8_t *act, int64_t arb, const q8a *tab, int64_t ts, float *out, int64_t ldo,
                         int add) {
	const uint8_t *p[16];
	tile_rows(w, rb, rows, p);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	__m512 dw = f16_rows(p, b0 * Q4_0_SIZE);
	for (int64_t b = 0; b < nbc; b++) {
		const int64_t o = (b0 + b) * Q4_0_SIZE;
		__m512i T[5], W[8];
		__m512 dwn = dw;
		prefetch_rows(p, o, 1);
		if (b + 1 < nbc) {
			// 32 bytes from the nibbles on reach the next block's scale;
			// the last block of a row must not read past it.
			transpose20(p, o + 2, T);
			dwn = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(T[4]));
		} else {
			transpose16(p, o + 2, T);
		}
		#pragma GCC unroll 16
		for (int g = 0; g < 4; g++) {
			W[g] = _mm512_and_si512(T[g], m4);                          // values 4g..4g+3
			W[g + 4] = _mm512_and_si512(_mm512_srli_epi16(T[g], 4), m4); // values 16+4g..
		}
		acc_block(NT, acc, W, dw, act + (b0 + b) * Q8_0_SIZE + 2, arb, tab, ts, b);
		dw = dwn;
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], add);
}

TILE_FNS(q4_0_tile)

#elif defined(DT_AVX2)

// q4_0_row multiplies one weight row by NT activation rows (a dxrow_fn,
// rows.h).
DT_INLINE void q4_0_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        const float *dx, int64_t nb) {
	__m256 acc[4];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q4_0_SIZE;
		const __m128i raw = _mm_loadu_si128((const __m128i *)(wb + 2));
		__m256i qw = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
		qw = _mm256_sub_epi8(qw, eight); // -8..7
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

DXROW_FNS(q4_0_row)

#elif defined(DT_NEON)

// q4_0_unpack returns a row's 32 quants of block wb as signed bytes:
// values 0..15 (low nibbles) and 16..31 (high nibbles), minus 8.
DT_INLINE void q4_0_unpack(const uint8_t *wb, int8x16_t *lo, int8x16_t *hi) {
	const uint8x16_t q = vld1q_u8(wb + 2);
	*lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
	*hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
}

DT_INLINE void q4_0_neon(const int NT, float *out, int64_t ldo, const uint8_t *w, int64_t rb, const uint8_t *act,
                         int64_t arb, int64_t nb) {
	float32x4_t acc[8];
	for (int j = 0; j < NT; j++) acc[j] = vdupq_n_f32(0);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *w0 = w + b * Q4_0_SIZE, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
		int8x16_t l0, h0, l1, h1, l2, h2, l3, h3, G[8];
		q4_0_unpack(w0, &l0, &h0);
		q4_0_unpack(w1, &l1, &h1);
		q4_0_unpack(w2, &l2, &h2);
		q4_0_unpack(w3, &l3, &h3);
		neon_transpose4(l0, l1, l2, l3, G);
		neon_transpose4(h0, h1, h2, h3, G + 4);
		const float32x4_t dw = neon_f16x4(w0, w1, w2, w3);
		for (int j = 0; j < NT; j++) {
			const uint8_t *x = act + j * arb + b * Q8_0_SIZE;
			int32x4_t s = neon_dot8(G, x + 2);
			acc[j] = vfmaq_f32(acc[j], vcvtq_f32_s32(s), vmulq_n_f32(dw, f16_to_f32(ld16(x))));
		}
	}
	for (int j = 0; j < NT; j++) vst1q_f32(out + j * ldo, acc[j]);
}

static float dot_q4_0(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sum = 0;
	for (int64_t b = 0; b < nb; b++, w += Q4_0_SIZE, x += Q8_0_SIZE) {
		int8x16_t lo, hi;
		q4_0_unpack(w, &lo, &hi);
		int32x4_t s = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8((const int8_t *)x + 2));
		s = vdotq_s32(s, hi, vld1q_s8((const int8_t *)x + 18));
		sum += (float)vaddvq_s32(s) * (f16_to_f32(ld16(w)) * f16_to_f32(ld16(x)));
	}
	return sum;
}

#else

static float dot_q4_0(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sum = 0;
	for (int64_t b = 0; b < nb; b++, w += Q4_0_SIZE, x += Q8_0_SIZE) {
		const uint8_t *qw = w + 2;
		const int8_t *qx = (const int8_t *)(x + 2);
		int32_t s = 0;
		for (int i = 0; i < QK / 2; i++) s += ((qw[i] & 0xf) - 8) * qx[i] + ((qw[i] >> 4) - 8) * qx[i + QK / 2];
		sum += (float)s * (f16_to_f32(ld16(w)) * f16_to_f32(ld16(x)));
	}
	return sum;
}

#endif

DT_API void dt_matmul_q4_0(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX512)
	q8a_matmul(q4_0_tile_tiles, 8, out, ldo, w, rb, lo, hi, act, arb, n, cols);
#elif defined(DT_AVX2)
	dx_rows_matmul(q4_0_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QK);
#elif defined(DT_NEON)
	int64_t r = lo;
	for (; r + 4 <= hi; r += 4)
		for (int64_t j = 0; j < n; j += 8) {
			float *o = out + j * ldo + r;
			const uint8_t *a = act + j * arb, *wr = w + r * rb;
			switch (n - j < 8 ? n - j : 8) {
			case 1: q4_0_neon(1, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 2: q4_0_neon(2, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 3: q4_0_neon(3, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 4: q4_0_neon(4, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 5: q4_0_neon(5, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 6: q4_0_neon(6, o, ldo, wr, rb, a, arb, cols / QK); break;
			case 7: q4_0_neon(7, o, ldo, wr, rb, a, arb, cols / QK); break;
			default: q4_0_neon(8, o, ldo, wr, rb, a, arb, cols / QK); break;
			}
		}
	for (; r < hi; r++)
		for (int64_t j = 0; j < n; j++) out[j * ldo + r] = dot_q4_0(w + r * rb, act + j * arb, cols / QK);
#else
	for (int64_t r = lo; r < hi; r++)
		for (int64_t j = 0; j < n; j++) out[j * ldo + r] = dot_q4_0(w + r * rb, act + j * arb, cols / QK);
#endif
}
