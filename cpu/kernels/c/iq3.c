// IQ3_XXS and IQ3_S weights × Q8_K activations (IQ3_XXS, IQ3_XS, IQ3_S and
// IQ3_M files), super-blocks of 256 values with an f16 scale d:
//
//	IQ3_XXS (98 bytes): qs[64] indices into iq3xxs_grid (four magnitudes
//	        each), then per 32 values a u32 of four 7-bit sign indices
//	        and a 4-bit scale, as IQ2_XXS (iq2.c): d·(2s+1)/4 · magnitude;
//	IQ3_S  (110 bytes): qs[64] low 8 bits of 9-bit indices into
//	        iq3s_grid (its bytes odd values 1..15), qh[8] the ninth bits,
//	        signs[32] one bit per value, 4-bit scales per 32 values:
//	        d·(2s+1) · magnitude.
//
// Grids copied from ggml-common.h (iq_grids.c). With SIMD (iq.h) each
// super-block of a weight row is unpacked once for every activation row,
// the signs moved onto the activations; the portable dot elsewhere.
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

DT_INLINE void iq3_s_groups(const uint8_t *wb, iq_group g[8]) {
	const uint8_t *qs = wb + 2, *qh = wb + 66, *signs = wb + 74, *scales = wb + 106;
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
#if defined(DT_AVX512)
		// Lane e's index: qs[8ib+e] and bit e of qh[ib] as its ninth.
		const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(qh[ib]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
		                                    _mm256_set1_epi32(1));
		const __m256i idx = _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * ib))), _mm256_slli_epi32(hi, 8));
		g[ib].q = _mm256_i32gather_epi32((const int *)dt_iq3s_grid, idx, 4);
#else
		g[ib].q = _mm256_set_epi32((int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 7)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 6)],
		                           (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 5)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 4)],
		                           (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 3)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 2)],
		                           (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 1)], (int)dt_iq3s_grid[iq3s_index(qs, qh, ib, 0)]);
#endif
		g[ib].neg = iq_neg((uint32_t)ld32(signs + 4 * ib));
		const int ls = 2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1;
		g[ib].sc = iq_scales(ls, ls);
	}
}

#if defined(DT_AVX512)
// iq3xxs_codes: dt_iq3xxs_grid as iq.h's codes, levels 0..7 for 4, 12,
// ..., 52, 62, word w's bytes at bits 3w and 8+3w.
static uint16_t iq3xxs_codes[256] __attribute__((aligned(64)));
static int iq3xxs_level(int v) { return v == 62 ? 7 : (v - 4) / 8; }
__attribute__((constructor)) static void iq3xxs_codes_init(void) {
	iq_set_codes(iq3xxs_codes, dt_iq3xxs_grid, 256, 4, 3, iq3xxs_level);
}

// Word lane 2j+w of pair k: entry 16k+j, shifted 3w; its code is word
// 8k+j of c0 for j < 8, else word 8k+j-8 of c1 (32 up in vpermt2w's
// index), less the 8k iq3_xxs_pairs adds.
static const uint16_t iq3xxs_pick[32] = {0,  0,  1,  1,  2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,
                                         32, 32, 33, 33, 34, 34, 35, 35, 36, 36, 37, 37, 38, 38, 39, 39};
static const uint16_t iq3xxs_shift[32] = {0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3,
                                          0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3};

DT_INLINE void iq3_xxs_pairs(const uint8_t *wb, iq_pairs *p) {
	const uint8_t *qs = wb + 2;
	const __m256i aux = _mm256_loadu_si256((const __m256i *)(wb + 2 + QKK / 4));
	iq_pair_signs(iq_aux_sign_bytes(aux), p);
	iq_pair_scales(iq_aux_scales(aux), p);
	// The 64 grid indices as words: c0 lane L holds the codes of entries
	// 16L..16L+7, c1 of 16L+8..16L+15 (the bytes unpacked in place).
	const __m512i z = _mm512_loadu_si512(qs);
	const __m512i c0 = iq_lookup256(iq3xxs_codes, _mm512_unpacklo_epi8(z, _mm512_setzero_si512()));
	const __m512i c1 = iq_lookup256(iq3xxs_codes, _mm512_unpackhi_epi8(z, _mm512_setzero_si512()));
	iq_spread_pairs(p, c0, c1, iq3xxs_pick, iq3xxs_shift, 0x0707, _mm_setr_epi8(4, 12, 20, 28, 36, 44, 52, 62, 0, 0, 0, 0, 0, 0, 0, 0));
}

// iq3s_codes: dt_iq3s_grid as IQ3_XXS's codes, levels 0..7 for 1, 3, ...,
// 15.
static uint16_t iq3s_codes[512] __attribute__((aligned(64)));
static int iq3s_level(int v) { return (v - 1) / 2; }
__attribute__((constructor)) static void iq3s_codes_init(void) { iq_set_codes(iq3s_codes, dt_iq3s_grid, 512, 4, 3, iq3s_level); }

DT_INLINE void iq3_s_pairs(const uint8_t *wb, iq_pairs *p) {
	const uint8_t *qs = wb + 2, *qh = wb + 66, *signs = wb + 74, *scales = wb + 106;
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) p->neg[k] = _cvtu64_mask64(ld64(signs + 8 * k));
	// Group ib's 2s+1 from nibble ib of the four scale bytes.
	const __m128i b = _mm_cvtsi32_si128(ld32(scales)), m4 = _mm_set1_epi8(15);
	const __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
	const __m256i ls = _mm256_cvtepu8_epi32(nib);
	iq_pair_scales(_mm256_add_epi32(_mm256_add_epi32(ls, ls), _mm256_set1_epi32(1)), p);
	// The indices' low bytes as in iq3_xxs_pairs; their ninth bits: entry
	// 16L+j of c0 (j < 8) is group 2L's j-th, bit j of qh[2L]; c1's of
	// qh[2L+1].
	const __m512i z = _mm512_loadu_si512(qs);
	const uint64_t h = ld64(qh);
	const __m512i c0 = iq_lookup512_hi(iq3s_codes, _mm512_unpacklo_epi8(z, _mm512_setzero_si512()),
	                                   _cvtu32_mask32((uint32_t)_pext_u64(h, 0x00ff00ff00ff00ffull)));
	const __m512i c1 = iq_lookup512_hi(iq3s_codes, _mm512_unpackhi_epi8(z, _mm512_setzero_si512()),
	                                   _cvtu32_mask32((uint32_t)_pext_u64(h, 0xff00ff00ff00ff00ull)));
	iq_spread_pairs(p, c0, c1, iq3xxs_pick, iq3xxs_shift, 0x0707, _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0));
}
#else
DT_INLINE void iq3_xxs_groups(const uint8_t *wb, iq_group g[8]) {
	const uint8_t *qs = wb + 2, *ss = wb + 2 + QKK / 4;
	uint32_t signs[8], ls[8];
	iq_aux_signs(_mm256_loadu_si256((const __m256i *)ss), signs, ls);
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
		const uint8_t *q = qs + 8 * ib;
		// Loads rather than a gather at every level, as IQ2_XXS's (iq2.c).
		g[ib].q = _mm256_set_epi32((int)dt_iq3xxs_grid[q[7]], (int)dt_iq3xxs_grid[q[6]], (int)dt_iq3xxs_grid[q[5]],
		                           (int)dt_iq3xxs_grid[q[4]], (int)dt_iq3xxs_grid[q[3]], (int)dt_iq3xxs_grid[q[2]],
		                           (int)dt_iq3xxs_grid[q[1]], (int)dt_iq3xxs_grid[q[0]]);
		g[ib].neg = iq_neg(signs[ib]);
		g[ib].sc = _mm256_set1_epi16((int16_t)ls[ib]);
	}
}
#endif


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

#if defined(DT_AVX512)
IQ_GROUPS_OF_PAIRS(iq3_xxs_groups, iq3_xxs_pairs)
IQ_MATMUL_PAIRS(iq3_xxs, IQ3_XXS_SIZE, iq3_xxs_pairs, iq3_xxs_groups, 0.25f)
IQ_MATMUL_PAIRS(iq3_s, IQ3_S_SIZE, iq3_s_pairs, iq3_s_groups, 1.0f)
#else
IQ_MATMUL(iq3_xxs, IQ3_XXS_SIZE, iq3_xxs_groups, 0.25f)
IQ_MATMUL(iq3_s, IQ3_S_SIZE, iq3_s_groups, 1.0f)
#endif
