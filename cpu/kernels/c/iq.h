// What the 2- and 3-bit i-quants share (iq2.c, iq3.c): ggml's
// ksigns_iq2xs computed, a 32-value group unpacked for SIMD, a
// super-block's integer sum and the matmul entry points.
#ifndef DOVETAIL_IQ_H
#define DOVETAIL_IQ_H
#include "rows.h"

// ksign is ggml's ksigns_iq2xs[k]: seven sign bits and their parity.
DT_INLINE uint32_t ksign(uint32_t k) { return k | (uint32_t)__builtin_parity(k) << 7; }

#if defined(DT_AVX2)

// ksign_bytes is ksign of each byte of x (7-bit indices, bit 7 clear):
// xor-folding a byte leaves its parity in its bit 0; the folds shift
// 16-bit lanes, which carry bits across bytes only into the bits the
// parity does not read.
DT_INLINE __m256i ksign_bytes(__m256i x) {
	__m256i t = _mm256_xor_si256(x, _mm256_srli_epi16(x, 4));
	t = _mm256_xor_si256(t, _mm256_srli_epi16(t, 2));
	t = _mm256_xor_si256(t, _mm256_srli_epi16(t, 1));
	return _mm256_or_si256(x, _mm256_slli_epi16(_mm256_and_si256(t, _mm256_set1_epi8(1)), 7));
}

// iq_aux_signs unpacks the eight sign-and-scale words of an IQ2_XXS or
// IQ3_XXS super-block (four 7-bit sign indices and a 4-bit scale s each)
// at once: signs[ib] group ib's four sign bytes, ls[ib] its 2s+1. Done
// word by word, the sign bytes' parity was most of a group's work.
DT_INLINE void iq_aux_signs(__m256i aux, uint32_t signs[8], uint32_t ls[8]) {
	const __m256i m7 = _mm256_set1_epi32(0x7f);
	__m256i x = _mm256_and_si256(aux, m7);
	x = _mm256_or_si256(x, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux, 7), m7), 8));
	x = _mm256_or_si256(x, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux, 14), m7), 16));
	x = _mm256_or_si256(x, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux, 21), m7), 24));
	_mm256_storeu_si256((__m256i *)signs, ksign_bytes(x));
	const __m256i s = _mm256_srli_epi32(aux, 28);
	_mm256_storeu_si256((__m256i *)ls, _mm256_add_epi32(_mm256_add_epi32(s, s), _mm256_set1_epi32(1)));
}

// iq_signs marks the negative values of a 32-value group: a mask register
// at AVX-512, 0xff bytes at AVX2.
#if defined(DT_AVX512)
typedef __mmask32 iq_signs;

// iq_neg is the mask of four sign bytes: bit v is value v's sign.
DT_INLINE iq_signs iq_neg(uint32_t signs) { return (__mmask32)signs; }

// iq_signed negates the activations a where neg is set.
DT_INLINE __m256i iq_signed(__m256i a, iq_signs neg) { return _mm256_mask_sub_epi8(a, neg, _mm256_setzero_si256(), a); }
#else
typedef __m256i iq_signs;

// iq_neg spreads four sign bytes so that byte v of the vector tests bit
// v%8 of sign byte v/8: 0xff where negative.
DT_INLINE iq_signs iq_neg(uint32_t signs) {
	const __m256i mask1 = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
	const __m256i mask2 = _mm256_set1_epi64x((int64_t)0x8040201008040201);
	const __m256i s = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)signs), mask1), mask2);
	return _mm256_cmpeq_epi8(s, mask2);
}

DT_INLINE __m256i iq_signed(__m256i a, iq_signs neg) { return _mm256_sub_epi8(_mm256_xor_si256(a, neg), neg); }
#endif

// iq_group is one 32-value group of a row, ready for the activations:
// magnitudes q (unsigned bytes), its signs and the scales (2s+1) as 16-bit
// lanes (the low half's for values 0..15).
typedef struct {
	__m256i q, sc;
	iq_signs neg;
} iq_group;

// iq_scales is two scales as 16-bit lanes, lo for the group's first 16
// values.
DT_INLINE __m256i iq_scales(int lo, int hi) {
	return _mm256_set_m128i(_mm_set1_epi16((int16_t)hi), _mm_set1_epi16((int16_t)lo));
}

// iq_bsum is a super-block's exact integer sum Σ (2s+1)·±g·q8 against the
// quants of one Q8_K activation block y (magnitudes of at most 62 and
// quants of at most 127: maddubs cannot saturate).
DT_INLINE int32_t iq_bsum(const iq_group g[8], const uint8_t *y) {
	__m256i sumi = _mm256_setzero_si256();
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
		const __m256i a = _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * ib));
		sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(g[ib].q, iq_signed(a, g[ib].neg)), g[ib].sc));
	}
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

#if defined(DT_AVX512)
#include "iqtile.h"
// With several activation rows the AVX-512 level multiplies through
// iqtile.h's tiles, bit for bit the row kernel's result.
#define IQ_TILED(name, SIZE, groups, F) IQ_TILE_FILL(iq_fill_##name, SIZE, groups) IQ_TILES(name, iq_fill_##name, F)
#define IQ_TILED_CALL(name)                                                                                     \
	if (n >= IQT_MIN_N) {                                                                                       \
		iq_tiles_##name(out, ldo, w, rb, lo, hi, act, arb, n, nb);                                              \
		return;                                                                                                 \
	}
#else
#define IQ_TILED(name, SIZE, groups, F)
#define IQ_TILED_CALL(name)
#endif

// IQ_MATMUL defines dt_matmul_NAME for an i-quant of SIZE bytes a
// super-block whose groups groups() unpacks. Each super-block of a weight
// row is unpacked once for every activation row, and its exact integer
// sum with each is added into out as ggml's generic dot adds it,
// (dw·dx)·sum in float, scaled by F (ggml's 1/8, 1/4 or 1) at the end: the
// result is the Go reference's bit for bit, whatever n.
#define IQ_MATMUL(name, SIZE, groups, F)                                                                        \
	IQ_TILED(name, SIZE, groups, F)                                                                             \
	static __attribute__((noinline)) void iq_rows_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb,   \
	                                                     int64_t lo, int64_t hi, const uint8_t *act, int64_t arb, \
	                                                     int64_t n, int64_t nb) {                                 \
		if (n == 1) {                                                                                           \
			for (int64_t r = lo; r < hi; r++) {                                                                 \
				const uint8_t *wr = w + r * rb;                                                                 \
				float acc = 0;                                                                                  \
				for (int64_t b = 0; b < nb; b++) {                                                              \
					iq_group g[8];                                                                              \
					groups(wr + b * SIZE, g);                                                                   \
					const uint8_t *y = act + b * Q8_K_SIZE;                                                     \
					acc += f16_to_f32(ld16(wr + b * SIZE)) * ldf(y) * (float)iq_bsum(g, y);                     \
				}                                                                                               \
				out[r] = (F) * acc;                                                                             \
			}                                                                                                   \
			return;                                                                                             \
		}                                                                                                       \
		for (int64_t r = lo; r < hi; r++) {                                                                     \
			const uint8_t *wr = w + r * rb;                                                                     \
			for (int64_t j = 0; j < n; j++) out[j * ldo + r] = 0;                                               \
			for (int64_t b = 0; b < nb; b++) {                                                                  \
				iq_group g[8];                                                                                  \
				groups(wr + b * SIZE, g);                                                                       \
				const float d = f16_to_f32(ld16(wr + b * SIZE));                                                \
				for (int64_t j = 0; j < n; j++) {                                                               \
					const uint8_t *y = act + j * arb + b * Q8_K_SIZE;                                           \
					out[j * ldo + r] += d * ldf(y) * (float)iq_bsum(g, y);                                      \
				}                                                                                               \
			}                                                                                                   \
			for (int64_t j = 0; j < n; j++) out[j * ldo + r] *= (F);                                            \
		}                                                                                                       \
	}                                                                                                           \
	DT_API void dt_matmul_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,   \
	                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {                  \
		const int64_t nb = cols / QKK;                                                                          \
		IQ_TILED_CALL(name)                                                                                     \
		iq_rows_##name(out, ldo, w, rb, lo, hi, act, arb, n, nb);                                               \
	}

#else

// signed8 is Σ ±grid byte j · q8[j] over an 8-value entry, negated where
// bit j of signs is set.
DT_INLINE int32_t signed8(uint64_t g, uint32_t signs, const int8_t *q8) {
	int32_t s = 0;
	for (int j = 0; j < 8; j++) {
		const int v = (int)((g >> (8 * j)) & 0xff) * q8[j];
		s += signs >> j & 1 ? -v : v;
	}
	return s;
}

// IQ_MATMUL without SIMD: a dot per pair of rows.
#define IQ_MATMUL(name, SIZE, groups, F)                                                                        \
	DT_API void dt_matmul_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,   \
	                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {                  \
		dots_matmul(dot_##name, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);                               \
	}

#endif

#endif
