// IQ2_XXS, IQ2_XS and IQ2_S weights × Q8_K activations (the 2-bit i-quants
// of IQ2_XXS, IQ2_XS, IQ2_S and IQ2_M files). A super-block of 256 values:
// an f16 scale, then
//
//	IQ2_XXS (66 bytes): per 32 values two u32, the first four bytes
//	        indices into iq2xxs_grid (8 magnitudes each), the second four
//	        7-bit sign indices and a 4-bit scale (top bits);
//	IQ2_XS  (74 bytes): per 8 values a u16, 9 bits of index into
//	        iq2xs_grid and 7 of sign index; then 4-bit scales per 16;
//	IQ2_S   (82 bytes): 8-bit indices, a byte of signs per 8 values, the
//	        indices' top 2 bits, 4-bit scales per 16, into iq2s_grid.
//
// A 7-bit sign index k stands for the byte k | parity(k) << 7 (ggml's
// ksigns_iq2xs). The value is d·(2s+1)/8 · magnitude · sign. With SIMD
// (iq.h) each super-block of a weight row is unpacked once for every
// activation row, the signs moved onto the activations; the portable dot
// elsewhere.
#include "iq.h"

#define IQ2_XXS_SIZE 66
#define IQ2_XS_SIZE 74
#define IQ2_S_SIZE 82

extern const uint64_t dt_iq2xxs_grid[256];
extern const uint64_t dt_iq2xs_grid[512];
extern const uint64_t dt_iq2s_grid[1024];

// iq2s_index is IQ2_S's grid index of 8-value entry l (0..3) of 32-value
// group ib.
DT_INLINE int iq2s_index(const uint8_t *qs, const uint8_t *qh, int ib, int l) {
	return qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300);
}

#if defined(DT_AVX512)
// iq2xxs_codes: dt_iq2xxs_grid as iq.h's codes, levels 0, 1, 2 for 8, 25
// and 43, word w's bytes at bits 2w and 8+2w.
static uint16_t iq2xxs_codes[256] __attribute__((aligned(64)));
static int iq2xxs_level(int v) { return v == 8 ? 0 : v == 25 ? 1 : 2; }
__attribute__((constructor)) static void iq2xxs_codes_init(void) {
	iq_set_codes(iq2xxs_codes, dt_iq2xxs_grid, 256, 8, 2, iq2xxs_level);
}

// IQ2_LEVELS maps the 2-bit grids' levels to their magnitudes.
#define IQ2_LEVELS _mm_setr_epi8(8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

// Word lane 4j+w of a pair: entry j of the pair's eight, shifted 2w.
static const uint16_t iq2xxs_pick[32] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                         4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7};
static const uint16_t iq2xxs_shift[32] = {0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6,
                                          0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6};

DT_INLINE void iq2_xxs_pairs(const uint8_t *wb, iq_pairs *p) {
	// The sign-and-scale words, the odd u32s of wb+2.., in order.
	const __m256 v0 = _mm256_loadu_ps((const float *)(wb + 2)), v1 = _mm256_loadu_ps((const float *)(wb + 34));
	const __m256i aux = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(v0, v1, 0xdd)), 0xd8);
	iq_pair_signs(iq_aux_sign_bytes(aux), p);
	iq_pair_scales(iq_aux_scales(aux), p);
	// The 32 grid indices, each u64's low four bytes, as words in order:
	// bytes 0..3 and 8..11 of each 128-bit lane.
	const __m512i spread = _mm512_broadcast_i32x4(_mm_setr_epi8(0, -1, 1, -1, 2, -1, 3, -1, 8, -1, 9, -1, 10, -1, 11, -1));
	const __m512i codes = iq_lookup256(iq2xxs_codes, _mm512_shuffle_epi8(_mm512_loadu_si512(wb + 2), spread));
	iq_spread_pairs(p, codes, codes, iq2xxs_pick, iq2xxs_shift, 0x0303, IQ2_LEVELS);
}

// iq2xs_codes: dt_iq2xs_grid as IQ2_XXS's codes.
static uint16_t iq2xs_codes[512] __attribute__((aligned(64)));
__attribute__((constructor)) static void iq2xs_codes_init(void) {
	iq_set_codes(iq2xs_codes, dt_iq2xs_grid, 512, 8, 2, iq2xxs_level);
}

DT_INLINE void iq2_xs_pairs(const uint8_t *wb, iq_pairs *p) {
	// The 32 u16 in order: 9 bits of grid index, a 7-bit sign index.
	const __m512i qv = _mm512_loadu_si512(wb + 2);
	iq_pair_signs(ksign_bytes(_mm512_cvtepi16_epi8(_mm512_srli_epi16(qv, 9))), p);
	iq_pair_scales16(wb + 2 + QKK / 4, p);
	const __m512i codes = iq_lookup512(iq2xs_codes, _mm512_and_si512(qv, _mm512_set1_epi16(511)));
	iq_spread_pairs(p, codes, codes, iq2xxs_pick, iq2xxs_shift, 0x0303, IQ2_LEVELS);
}

DT_INLINE void iq2_s_pairs(const uint8_t *wb, iq_pairs *p) {
	const uint8_t *qs = wb + 2, *signs = wb + 2 + QKK / 8, *qh = wb + 2 + QKK / 4;
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) p->neg[k] = _cvtu64_mask64(ld64(signs + 8 * k));
	iq_pair_scales16(wb + 2 + QKK / 4 + QKK / 32, p);
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) {
		// Entry l of group ib: qs[4ib+l] and bits 2l, 2l+1 of qh[ib] as its
		// top two; both groups of the pair in one gather.
		const __m256i h = _mm256_setr_epi32(qh[2 * k], qh[2 * k], qh[2 * k], qh[2 * k], qh[2 * k + 1], qh[2 * k + 1], qh[2 * k + 1], qh[2 * k + 1]);
		const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(h, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)), _mm256_set1_epi32(3));
		const __m256i idx = _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * k))), _mm256_slli_epi32(hi, 8));
		p->q[k] = _mm512_i32gather_epi64(idx, (const long long *)dt_iq2s_grid, 8);
	}
}
#endif

#if defined(DT_AVX2)

#if !defined(DT_AVX512)
DT_INLINE void iq2_xxs_groups(const uint8_t *wb, iq_group g[8]) {
	// The groups' sign-and-scale words, the odd u32s of wb+2.., in order.
	const __m256 v0 = _mm256_loadu_ps((const float *)(wb + 2)), v1 = _mm256_loadu_ps((const float *)(wb + 34));
	const __m256i aux = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(v0, v1, 0xdd)), 0xd8);
	uint32_t signs[8], ls[8];
	iq_aux_signs(aux, signs, ls);
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
		const uint8_t *q = wb + 2 + 8 * ib;
		// Four loads rather than a gather, at every level (IQ2_XS's
		// too): on AMD's Zen 5 the loads decoded faster
		// (docs/measurements/kernels-i-quants.md, "The files users
		// download, against ik_llama.cpp again" ("Side by side") and
		// "The i-quants' signs and scales, a super-block at once").
		g[ib].q = _mm256_set_epi64x((int64_t)dt_iq2xxs_grid[q[3]], (int64_t)dt_iq2xxs_grid[q[2]],
		                            (int64_t)dt_iq2xxs_grid[q[1]], (int64_t)dt_iq2xxs_grid[q[0]]);
		g[ib].neg = iq_neg(signs[ib]);
		g[ib].sc = _mm256_set1_epi16((int16_t)ls[ib]);
	}
}
#endif

DT_INLINE void iq2_xs_groups(const uint8_t *wb, iq_group g[8]) {
	const uint8_t *scales = wb + 2 + QKK / 4;
	// The 32 sign indices (each u16's top 7 bits) as bytes, in order, and
	// their sign bytes at once (see iq_aux_signs).
	const __m256i u0 = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(wb + 2)), 9);
	const __m256i u1 = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(wb + 34)), 9);
	uint32_t signs[8];
	_mm256_storeu_si256((__m256i *)signs, ksign_bytes(_mm256_permute4x64_epi64(_mm256_packus_epi16(u0, u1), 0xd8)));
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
		uint32_t q[4];
		#pragma GCC unroll 4
		for (int l = 0; l < 4; l++) q[l] = ld16(wb + 2 + 2 * (4 * ib + l));
		g[ib].q = _mm256_set_epi64x((int64_t)dt_iq2xs_grid[q[3] & 511], (int64_t)dt_iq2xs_grid[q[2] & 511],
		                            (int64_t)dt_iq2xs_grid[q[1] & 511], (int64_t)dt_iq2xs_grid[q[0] & 511]);
		g[ib].neg = iq_neg(signs[ib]);
		g[ib].sc = iq_scales(2 * (scales[ib] & 0xf) + 1, 2 * (scales[ib] >> 4) + 1);
	}
}

DT_INLINE void iq2_s_groups(const uint8_t *wb, iq_group g[8]) {
	const uint8_t *qs = wb + 2, *signs = wb + 2 + QKK / 8, *qh = wb + 2 + QKK / 4, *scales = wb + 2 + QKK / 4 + QKK / 32;
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
#if defined(DT_AVX512)
		// Entry l's index: qs[4ib+l] and bits 2l, 2l+1 of qh[ib] as
		// its top two. A gather: its indices take a few operations
		// each, and the loads decoded slower here
		// (docs/measurements/kernels-i-quants.md, "The i-quants'
		// signs and scales, a super-block at once").
		const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(qh[ib]), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi32(3));
		const __m128i idx = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(ld32(qs + 4 * ib))), _mm_slli_epi32(hi, 8));
		g[ib].q = _mm256_i32gather_epi64((const long long *)dt_iq2s_grid, idx, 8);
#else
		g[ib].q = _mm256_set_epi64x(
		    (int64_t)dt_iq2s_grid[iq2s_index(qs, qh, ib, 3)], (int64_t)dt_iq2s_grid[iq2s_index(qs, qh, ib, 2)],
		    (int64_t)dt_iq2s_grid[iq2s_index(qs, qh, ib, 1)], (int64_t)dt_iq2s_grid[iq2s_index(qs, qh, ib, 0)]);
#endif
		g[ib].neg = iq_neg(ld32(signs + 4 * ib));
		g[ib].sc = iq_scales(2 * (scales[ib] & 0xf) + 1, 2 * (scales[ib] >> 4) + 1);
	}
}

#else

// The portable dots mirror quant.DotIQ2_*Q8_K's integer sums.
static float dot_iq2_xxs(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += IQ2_XXS_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		int32_t bsum = 0;
		for (int ib = 0; ib < 8; ib++) {
			const uint8_t *q = w + 2 + 8 * ib;
			const uint32_t aux = ld32(q + 4);
			int32_t sumi = 0;
			for (int l = 0; l < 4; l++) sumi += signed8(dt_iq2xxs_grid[q[l]], ksign(aux >> (7 * l) & 127), q8 + 32 * ib + 8 * l);
			bsum += sumi * (2 * (int32_t)(aux >> 28) + 1);
		}
		sumf += f16_to_f32(ld16(w)) * ldf(x) * (float)bsum;
	}
	return 0.125f * sumf;
}

static float dot_iq2_xs(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += IQ2_XS_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		const uint8_t *scales = w + 2 + QKK / 4;
		int32_t bsum = 0;
		for (int ib = 0; ib < 8; ib++) {
			int32_t sumi[2] = {0, 0};
			for (int l = 0; l < 4; l++) {
				const uint32_t q = ld16(w + 2 + 2 * (4 * ib + l));
				sumi[l / 2] += signed8(dt_iq2xs_grid[q & 511], ksign(q >> 9), q8 + 32 * ib + 8 * l);
			}
			bsum += sumi[0] * (2 * (scales[ib] & 0xf) + 1) + sumi[1] * (2 * (scales[ib] >> 4) + 1);
		}
		sumf += f16_to_f32(ld16(w)) * ldf(x) * (float)bsum;
	}
	return 0.125f * sumf;
}

static float dot_iq2_s(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += IQ2_S_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		const uint8_t *qs = w + 2, *signs = w + 2 + QKK / 8, *qh = w + 2 + QKK / 4, *scales = w + 2 + QKK / 4 + QKK / 32;
		int32_t bsum = 0;
		for (int ib = 0; ib < 8; ib++) {
			int32_t sumi[2] = {0, 0};
			for (int l = 0; l < 4; l++)
				sumi[l / 2] += signed8(dt_iq2s_grid[iq2s_index(qs, qh, ib, l)], signs[4 * ib + l], q8 + 32 * ib + 8 * l);
			bsum += sumi[0] * (2 * (scales[ib] & 0xf) + 1) + sumi[1] * (2 * (scales[ib] >> 4) + 1);
		}
		sumf += f16_to_f32(ld16(w)) * ldf(x) * (float)bsum;
	}
	return 0.125f * sumf;
}

#endif

#if defined(DT_AVX512)
// The tiles of IQ2_XS and IQ2_S fill from their groups: from pairs they
// verified 4–9% slower; IQ2_XXS's no slower.
IQ_GROUPS_OF_PAIRS(iq2_xxs_groups, iq2_xxs_pairs)
IQ_MATMUL_PAIRS(iq2_xxs, IQ2_XXS_SIZE, iq2_xxs_pairs, iq2_xxs_groups, 0.125f)
IQ_MATMUL_PAIRS(iq2_xs, IQ2_XS_SIZE, iq2_xs_pairs, iq2_xs_groups, 0.125f)
IQ_MATMUL_PAIRS(iq2_s, IQ2_S_SIZE, iq2_s_pairs, iq2_s_groups, 0.125f)
#else
IQ_MATMUL(iq2_xxs, IQ2_XXS_SIZE, iq2_xxs_groups, 0.125f)
IQ_MATMUL(iq2_xs, IQ2_XS_SIZE, iq2_xs_groups, 0.125f)
IQ_MATMUL(iq2_s, IQ2_S_SIZE, iq2_s_groups, 0.125f)
#endif
