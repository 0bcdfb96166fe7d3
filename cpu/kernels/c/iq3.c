// IQ3_XXS and IQ3_S weights × Q8_K activations (IQ3_XXS, IQ3_XS, IQ3_S and
// IQ3_M files). IQ3_XXS, 98 bytes a super-block of 256 values: an f16
// scale, qs[64] indices into iq3xxs_grid (four magnitudes each), then per
// 32 values a u32 of four 7-bit sign indices and a 4-bit scale, as IQ2_XXS
// (iq2.c, whose row kernel it shares: the value is d·(2s+1)/4 ·
// magnitude · sign). IQ3_S, a super-block of 256 values: an f16 scale, qs[64] low 8 bits of 9-bit indices into a
// grid of four magnitudes each (iq3s_grid, copied from ggml-common.h; its
// bytes are odd values 1..15), qh[8] the ninth bits, signs[32] one bit per
// value, and 4-bit scales per 32 values (the scale is 2s+1).
//
// With SIMD one weight row against up to four activation rows: the grid
// entries are looked up once per row into vectors of 32 unsigned bytes,
// the signs moved onto the activations (as ggml's AVX2 kernel does); the
// portable dot elsewhere.
#include "iq.h"

#define IQ3_XXS_SIZE 98
#define IQ3_S_SIZE 110

extern const uint32_t dt_iq3xxs_grid[256];
extern const uint32_t dt_iq3s_grid[512];

// iq3s_index is the grid index of value pair entry e (0..7) of 32-value
// group ib: qs[8ib+e] with the ninth bit from qh[ib].
DT_INLINE int iq3s_index(const uint8_t *qs, const uint8_t *qh, int ib, int e) {
	return qs[8 * ib + e] | ((qh[ib] << (8 - e)) & 256);
}

#if defined(DT_AVX2)

DT_INLINE void iq3_s_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                         int64_t nb) {
	const __m256i mask1 = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
	const __m256i mask2 = _mm256_set1_epi64x((int64_t)0x8040201008040201);
	__m256 acc[4];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * IQ3_S_SIZE, *qs = wb + 2, *qh = wb + 66, *signs = wb + 74, *scales = wb + 106;
		__m256i q[8], neg[8], sc[8];
		#pragma GCC unroll 8
		for (int ib = 0; ib < 8; ib++) {
			q[ib] = _mm256_set_epi32((int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 7)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 6)],
			                         (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 5)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 4)],
			                         (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 3)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 2)],
			                         (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 1)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 0)]);
			// Byte k of the four sign bytes, spread so that byte v of the
			// vector tests bit v%8 of sign byte v/8: 0xff where negative.
			const __m256i s = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)ld32(signs + 4 * ib)), mask1), mask2);
			neg[ib] = _mm256_cmpeq_epi8(s, mask2);
			sc[ib] = _mm256_set1_epi16((int16_t)(2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1));
		}
		const float d = f16_to_f32(ld16(wb));
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m256i sumi = _mm256_setzero_si256();
			#pragma GCC unroll 8
			for (int ib = 0; ib < 8; ib++) {
				const __m256i a = _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * ib));
				const __m256i as = _mm256_sub_epi8(_mm256_xor_si256(a, neg[ib]), neg[ib]);
				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[ib], as), sc[ib]));
			}
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * ldf(y)), _mm256_cvtepi32_ps(sumi), acc[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]);
}

ROW_FNS(iq3_s_row)

DT_INLINE void iq3_xxs_groups(const uint8_t *wb, iq_group g[8]) {
	const uint8_t *qs = wb + 2, *ss = wb + 2 + QKK / 4;
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
		const uint8_t *q = qs + 8 * ib;
		const uint32_t aux = ld32(ss + 4 * ib);
		g[ib].q = _mm256_set_epi32((int)dt_iq3xxs_grid[q[7]], (int)dt_iq3xxs_grid[q[6]], (int)dt_iq3xxs_grid[q[5]],
		                           (int)dt_iq3xxs_grid[q[4]], (int)dt_iq3xxs_grid[q[3]], (int)dt_iq3xxs_grid[q[2]],
		                           (int)dt_iq3xxs_grid[q[1]], (int)dt_iq3xxs_grid[q[0]]);
		g[ib].neg = iq_neg(ksign(aux & 127) | ksign(aux >> 7 & 127) << 8 | ksign(aux >> 14 & 127) << 16 |
		                   ksign(aux >> 21 & 127) << 24);
		const int ls = 2 * (int)(aux >> 28) + 1;
		g[ib].sc = iq_scales(ls, ls);
	}
}

IQ_ROW(iq3_xxs_row, IQ3_XXS_SIZE, iq3_xxs_groups, 0.25f)
ROW_FNS(iq3_xxs_row)

#else

// dot_iq3_s mirrors quant.DotIQ3_SQ8_K's integer sums.
static float dot_iq3_s(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += IQ3_S_SIZE, x += Q8_K_SIZE) {
		const uint8_t *qs = w + 2, *qh = w + 66, *signs = w + 74, *scales = w + 106;
		const int8_t *q8 = (const int8_t *)(x + 4);
		int32_t bsum = 0;
		for (int ib = 0; ib < 8; ib++) {
			int32_t sumi = 0;
			for (int e = 0; e < 8; e++) {
				const uint32_t g = dt_iq3s_grid[iq3s_index(qs, qh, ib, e)];
				for (int k = 0; k < 4; k++) {
					const int v = 4 * e + k, m = (g >> (8 * k)) & 0xff;
					sumi += (signs[4 * ib + v / 8] >> (v % 8) & 1 ? -m : m) * q8[32 * ib + v];
				}
			}
			bsum += sumi * (2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1);
		}
		sumf += f16_to_f32(ld16(w)) * ldf(x) * (float)bsum;
	}
	return sumf;
}

// dot_iq3_xxs mirrors quant.DotIQ3_XXSQ8_K's integer sums.
static float dot_iq3_xxs(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += IQ3_XXS_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		const uint8_t *qs = w + 2, *ss = w + 2 + QKK / 4;
		int32_t bsum = 0;
		for (int ib = 0; ib < 8; ib++) {
			const uint32_t aux = ld32(ss + 4 * ib);
			int32_t sumi = 0;
			for (int l = 0; l < 4; l++) {
				const uint64_t g = dt_iq3xxs_grid[qs[8 * ib + 2 * l]] | (uint64_t)dt_iq3xxs_grid[qs[8 * ib + 2 * l + 1]] << 32;
				sumi += signed8(g, ksign(aux >> (7 * l) & 127), q8 + 32 * ib + 8 * l);
			}
			bsum += sumi * (2 * (int32_t)(aux >> 28) + 1);
		}
		sumf += f16_to_f32(ld16(w)) * ldf(x) * (float)bsum;
	}
	return 0.25f * sumf;
}

#endif

IQ_MATMUL(iq3_xxs)

DT_API void dt_matmul_iq3_s(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                            const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX2)
	rows_matmul(iq3_s_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#else
	dots_matmul(dot_iq3_s, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#endif
}
