// What the 2- and 3-bit i-quants share (iq2.c, iq3.c): ggml's
// ksigns_iq2xs computed, a 32-value group unpacked for SIMD, a
// super-block's integer sum and the matmul entry points.
#ifndef DOVETAIL_IQ_H
#define DOVETAIL_IQ_H
#include "rows.h"

// iq_d16 is the scale of a super-block that starts with it as an f16.
DT_INLINE float iq_d16(const uint8_t *wb) { return f16_to_f32(ld16(wb)); }

// ksign is ggml's ksigns_iq2xs[k]: seven sign bits and their parity.
DT_INLINE uint32_t ksign(uint32_t k) { return k | (uint32_t)__builtin_parity(k) << 7; }

#if defined(DT_AVX2)

// ksign_bytes is ksign of each byte of x (7-bit indices, bit 7 clear):
// each byte's parity from its nibbles' through a vpshufb table (fewer
// steps in a row than xor-folding: IQ2_XXS's decode kernel 10% faster at
// both levels).
DT_INLINE __m256i ksign_bytes(__m256i x) {
	const __m256i pt = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0));
	const __m256i m4 = _mm256_set1_epi8(15);
	const __m256i par = _mm256_xor_si256(_mm256_shuffle_epi8(pt, _mm256_and_si256(x, m4)),
	                                     _mm256_shuffle_epi8(pt, _mm256_and_si256(_mm256_srli_epi16(x, 4), m4)));
	return _mm256_or_si256(x, par);
}

// iq_aux_signs unpacks the eight sign-and-scale words of an IQ2_XXS or
// IQ3_XXS super-block (four 7-bit sign indices and a 4-bit scale s each)
// at once: signs[ib] group ib's four sign bytes, ls[ib] its 2s+1
// (iq_aux_sign_bytes and iq_aux_scales, as vectors). Done word by word,
// the sign bytes' parity was most of a group's work.
DT_INLINE __m256i iq_aux_sign_bytes(__m256i aux) {
	const __m256i m7 = _mm256_set1_epi32(0x7f);
	__m256i x = _mm256_and_si256(aux, m7);
	x = _mm256_or_si256(x, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux, 7), m7), 8));
	x = _mm256_or_si256(x, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux, 14), m7), 16));
	x = _mm256_or_si256(x, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux, 21), m7), 24));
	return ksign_bytes(x);
}

DT_INLINE __m256i iq_aux_scales(__m256i aux) {
	const __m256i s = _mm256_srli_epi32(aux, 28);
	return _mm256_add_epi32(_mm256_add_epi32(s, s), _mm256_set1_epi32(1));
}

DT_INLINE void iq_aux_signs(__m256i aux, uint32_t signs[8], uint32_t ls[8]) {
	_mm256_storeu_si256((__m256i *)signs, iq_aux_sign_bytes(aux));
	_mm256_storeu_si256((__m256i *)ls, iq_aux_scales(aux));
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
// v%8 of sign byte v/8: -1 where negative, else 1 (a value's sign, for
// vpsignb: one instruction an activation vector, where a mask took two).
DT_INLINE iq_signs iq_neg(uint32_t signs) {
	const __m256i mask1 = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
	const __m256i mask2 = _mm256_set1_epi64x((int64_t)0x8040201008040201);
	const __m256i s = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)signs), mask1), mask2);
	return _mm256_or_si256(_mm256_cmpeq_epi8(s, mask2), _mm256_set1_epi8(1));
}

// iq_signed negates the activations a where neg is -1 (-128 stays -128, as
// the two's-complement negation it replaces left it).
DT_INLINE __m256i iq_signed(__m256i a, iq_signs neg) { return _mm256_sign_epi8(a, neg); }
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

// iq_fsum is (float)iq_bsum.
DT_INLINE float iq_fsum(const iq_group g[8], const uint8_t *y) { return (float)iq_bsum(g, y); }

#if defined(DT_AVX512)
// The grids of IQ2_XXS and IQ2_XS (magnitudes 8, 25, 43), IQ3_XXS (4, 12,
// ..., 52, 62) and IQ3_S (1, 3, ..., 15) hold few distinct bytes: an entry
// is a 16-bit code of their levels, 32 entries are looked up at once in a
// 256-code table held in eight zmm (vpermt2w; two such for 512 entries)
// and spread into bytes by a shift, a mask and a vpshufb, where loading the entries one by one and inserting them
// into vectors took most of the row kernel's instructions. A code keeps
// the levels of an entry's 16-bit word w in bits s_w.. and 8+s_w.., so
// that (code >> s_w) & mask is that word's two bytes of levels.

// iq_lookup256 is table t[idx] for 32 word indices under 256.
DT_INLINE __m512i iq_lookup256(const uint16_t *t, __m512i idx) {
	const __m512i r0 = _mm512_permutex2var_epi16(_mm512_loadu_si512(t), idx, _mm512_loadu_si512(t + 32));
	const __m512i r1 = _mm512_permutex2var_epi16(_mm512_loadu_si512(t + 64), idx, _mm512_loadu_si512(t + 96));
	const __m512i r2 = _mm512_permutex2var_epi16(_mm512_loadu_si512(t + 128), idx, _mm512_loadu_si512(t + 160));
	const __m512i r3 = _mm512_permutex2var_epi16(_mm512_loadu_si512(t + 192), idx, _mm512_loadu_si512(t + 224));
	const __mmask32 m6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64));
	const __mmask32 m7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
	return _mm512_mask_blend_epi16(m7, _mm512_mask_blend_epi16(m6, r0, r1), _mm512_mask_blend_epi16(m6, r2, r3));
}

// iq_lookup512 is table t[idx + 256·(bit l of hi)] for 32 word indices
// under 256; iq_lookup512 of indices under 512.
DT_INLINE __m512i iq_lookup512_hi(const uint16_t *t, __m512i idx, __mmask32 hi) {
	return _mm512_mask_blend_epi16(hi, iq_lookup256(t, idx), iq_lookup256(t + 256, idx));
}

DT_INLINE __m512i iq_lookup512(const uint16_t *t, __m512i idx) {
	return iq_lookup512_hi(t, idx, _mm512_test_epi16_mask(idx, _mm512_set1_epi16(256)));
}

// iq_spread is 64 magnitude bytes from codes c0, c1: word lane l takes
// code pick[l] of the two (vpermt2w), shifted right by shift[l], masked,
// its two level bytes mapped through lut (a vpshufb table; levels under
// 16).
DT_INLINE __m512i iq_spread(__m512i c0, __m512i c1, __m512i pick, __m512i shift, __m512i mask, __m512i lut) {
	const __m512i x = _mm512_srlv_epi16(_mm512_permutex2var_epi16(c0, pick, c1), shift);
	return _mm512_shuffle_epi8(lut, _mm512_and_si512(x, mask));
}

// iq_set_codes fills codes[e] for the n entries of grid (bytes bytes each)
// from level(): word w's even byte at bit w·step, its odd byte at bit
// 8 + w·step.
DT_INLINE void iq_set_codes(uint16_t *codes, const void *grid, int n, int bytes, int step, int (*level)(int)) {
	for (int e = 0; e < n; e++) {
		const uint8_t *g = (const uint8_t *)grid + (int64_t)e * bytes;
		uint32_t c = 0;
		for (int b = 0; b < bytes; b++) c |= (uint32_t)level(g[b]) << ((b & 1) * 8 + (b / 2) * step);
		codes[e] = (uint16_t)c;
	}
}

// iq_pairs is a super-block's eight groups two by two in zmm, pair k
// group 2k in its low half: magnitudes, signs (bit v: value v), and the
// scales 2s+1 as 16-bit lanes. With 512-bit multiplies, and the scales
// spread by vpermw rather than one by one, a decode row's super-block
// takes about 110 instructions where eight iq_groups took about 190.
typedef struct {
	__m512i q[4], sc[4];
	__mmask64 neg[4];
} iq_pairs;

// iq_spread_pairs sets p's magnitudes from codes c0, c1: pair k is
// iq_spread with the word lanes' picks pick[l] + 8k (a pair's entries
// are 8 words further on), shift and mask, and levels 0..15 mapped to
// the bytes of levels.
DT_INLINE void iq_spread_pairs(iq_pairs *p, __m512i c0, __m512i c1, const uint16_t pick[32], const uint16_t shift[32],
                               short mask, __m128i levels) {
	const __m512i pk = _mm512_loadu_si512(pick), sh = _mm512_loadu_si512(shift), lut = _mm512_broadcast_i32x4(levels);
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++)
		p->q[k] = iq_spread(c0, c1, _mm512_add_epi16(pk, _mm512_set1_epi16((short)(8 * k))), sh, _mm512_set1_epi16(mask), lut);
}

// iq_pair_signs sets the signs from IQ2_XXS's or IQ3_XXS's sign bytes
// (iq_aux_sign_bytes), iq_pair_scales the scales from the eight groups'
// 2s+1 (32-bit lanes).
DT_INLINE void iq_pair_signs(__m256i sb, iq_pairs *p) {
	// Through general registers: spreading each pair's bytes and testing
	// their bits in the vector unit (vpermq, vpshufb, vptestmb) decoded
	// slower on Zen 5.
	const __m128i lo = _mm256_castsi256_si128(sb), hi = _mm256_extracti128_si256(sb, 1);
	p->neg[0] = _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(lo));
	p->neg[1] = _cvtu64_mask64((uint64_t)_mm_extract_epi64(lo, 1));
	p->neg[2] = _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(hi));
	p->neg[3] = _cvtu64_mask64((uint64_t)_mm_extract_epi64(hi, 1));
}

DT_INLINE void iq_pair_scales(__m256i ls, iq_pairs *p) {
	// Word lanes 0..15 of pair k: ls[2k]'s low word (word 4k); 16..31:
	// ls[2k+1]'s (word 4k+2).
	const __m512i base = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
	const __m512i z = _mm512_castsi256_si512(ls);
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) p->sc[k] = _mm512_permutexvar_epi16(_mm512_add_epi16(base, _mm512_set1_epi16((short)(4 * k))), z);
}

// iq_word_ramp is the words 0, 1, ..., 31: shifted right by k, the index
// that repeats each of 32 >> k words 1 << k times (vpermw).
DT_INLINE __m512i iq_word_ramp(void) {
	return _mm512_set_epi64(0x001f001e001d001c, 0x001b001a00190018, 0x0017001600150014, 0x0013001200110010,
	                        0x000f000e000d000c, 0x000b000a00090008, 0x0007000600050004, 0x0003000200010000);
}

// iq_pair_spread16 sets p's scales from the 16 words of ls, word 2ib+h the
// scale (2s+1) of group ib's half h.
DT_INLINE void iq_pair_spread16(__m256i ls, iq_pairs *p) {
	const __m512i z = _mm512_castsi256_si512(ls);
	// Word lane l of pair k: 16-value sub-block 4k + l/8.
	const __m512i sub = _mm512_srli_epi16(iq_word_ramp(), 3);
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) p->sc[k] = _mm512_permutexvar_epi16(_mm512_add_epi16(sub, _mm512_set1_epi16((short)(4 * k))), z);
}

// iq_pair_scales16 sets the scales from eight bytes of two 4-bit scales
// s each (the low one for a group's first 16 values), as 2s+1.
DT_INLINE void iq_pair_scales16(const uint8_t *scales, iq_pairs *p) {
	const __m128i b = _mm_loadl_epi64((const __m128i *)scales), m4 = _mm_set1_epi8(15);
	const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
	const __m256i w = _mm256_cvtepu8_epi16(s); // word 2ib+h: group ib's half h
	iq_pair_spread16(_mm256_add_epi16(_mm256_add_epi16(w, w), _mm256_set1_epi16(1)), p);
}

// iq_fsum512 is iq_bsum of the pairs p, converted to float in a vector
// register (as (float) of the integer rounds it).
DT_INLINE float iq_fsum512(const iq_pairs *p, const uint8_t *y) {
	__m512i sumi = _mm512_setzero_si512();
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) {
		__m512i a = _mm512_loadu_si512(y + 4 + 64 * k);
		a = _mm512_mask_sub_epi8(a, p->neg[k], _mm512_setzero_si512(), a);
		sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(p->q[k], a), p->sc[k]));
	}
	const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtss_f32(_mm_cvtepi32_ps(s));
}

// iq_groups_of_pairs splits p into eight groups (for the tiles).
DT_INLINE void iq_groups_of_pairs(const iq_pairs *p, iq_group g[8]) {
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) {
		g[2 * k].q = _mm512_castsi512_si256(p->q[k]);
		g[2 * k + 1].q = _mm512_extracti64x4_epi64(p->q[k], 1);
		g[2 * k].sc = _mm512_castsi512_si256(p->sc[k]);
		g[2 * k + 1].sc = _mm512_extracti64x4_epi64(p->sc[k], 1);
		g[2 * k].neg = (__mmask32)_cvtmask64_u64(p->neg[k]);
		g[2 * k + 1].neg = (__mmask32)(_cvtmask64_u64(p->neg[k]) >> 32);
	}
}
#endif

#if defined(DT_AVX512)
#include "iqtile.h"
// With several activation rows the AVX-512 level multiplies through
// iqtile.h's tiles, bit for bit the row kernel's result.
#define IQ_TILED(name, SIZE, groups, dfn, F) IQ_TILE_FILL(iq_fill_##name, SIZE, groups, dfn) IQ_TILES(name, iq_fill_##name, F)
#define IQ_TILED_CALL(name)                                                                                     \
	if (n >= IQT_MIN_N) {                                                                                       \
		iq_tiles_##name(out, ldo, w, rb, lo, hi, act, arb, n, nb);                                              \
		return;                                                                                                 \
	}
#else
#define IQ_TILED(name, SIZE, groups, dfn, F)
#define IQ_TILED_CALL(name)
#endif

// IQ_ROWS defines iq_rows_NAME for an i-quant of SIZE bytes a super-block:
// each super-block of a weight row is unpacked (by unpack, into u, which
// DECL declares) once for every activation row, and its exact integer sum
// with each (fsum: as a float) is added into out as ggml's generic dot adds it,
// (dw·dx)·sum in float, scaled by F (ggml's 1/8, 1/4 or 1) at the end: the
// result is the Go reference's bit for bit, whatever n.
#define IQ_ROWS(name, SIZE, DECL, unpack, fsum, dfn, F)                                                           \
	static __attribute__((noinline)) void iq_rows_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb,   \
	                                                     int64_t lo, int64_t hi, const uint8_t *act, int64_t arb, \
	                                                     int64_t n, int64_t nb) {                                 \
		if (n == 1) {                                                                                           \
			for (int64_t r = lo; r < hi; r++) {                                                                 \
				const uint8_t *wr = w + r * rb;                                                                 \
				float acc = 0;                                                                                  \
				for (int64_t b = 0; b < nb; b++) {                                                              \
					DECL;                                                                                       \
					unpack(wr + b * SIZE, u);                                                                   \
					const uint8_t *y = act + b * Q8_K_SIZE;                                                     \
					acc += dfn(wr + b * SIZE) * ldf(y) * fsum(u, y);                                            \
				}                                                                                               \
				out[r] = (F) * acc;                                                                             \
			}                                                                                                   \
			return;                                                                                             \
		}                                                                                                       \
		for (int64_t r = lo; r < hi; r++) {                                                                     \
			const uint8_t *wr = w + r * rb;                                                                     \
			for (int64_t j = 0; j < n; j++) out[j * ldo + r] = 0;                                               \
			for (int64_t b = 0; b < nb; b++) {                                                                  \
				DECL;                                                                                           \
				unpack(wr + b * SIZE, u);                                                                       \
				const float d = dfn(wr + b * SIZE);                                                             \
				for (int64_t j = 0; j < n; j++) {                                                               \
					const uint8_t *y = act + j * arb + b * Q8_K_SIZE;                                           \
					out[j * ldo + r] += d * ldf(y) * fsum(u, y);                                                \
				}                                                                                               \
			}                                                                                                   \
			for (int64_t j = 0; j < n; j++) out[j * ldo + r] *= (F);                                            \
		}                                                                                                       \
	}

// IQ_ENTRY defines dt_matmul_NAME: the tiles (AVX-512) or iq_rows_NAME.
#define IQ_ENTRY(name)                                                                                          \
	DT_API void dt_matmul_##name(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,   \
	                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {                  \
		const int64_t nb = cols / QKK;                                                                          \
		IQ_TILED_CALL(name)                                                                                     \
		iq_rows_##name(out, ldo, w, rb, lo, hi, act, arb, n, nb);                                               \
	}

// IQ_MATMUL defines dt_matmul_NAME for an i-quant whose groups groups()
// unpacks (eight iq_group a super-block).
// IQ_MATMUL_D is the matmul of a type whose super-block's scale dfn reads;
// IQ_MATMUL that of the types whose blocks start with it (an f16).
#define IQ_MATMUL_D(name, SIZE, groups, dfn, F)                                                                 \
	IQ_TILED(name, SIZE, groups, dfn, F)                                                                        \
	IQ_ROWS(name, SIZE, iq_group u[8], groups, iq_fsum, dfn, F)                                                 \
	IQ_ENTRY(name)
#define IQ_MATMUL(name, SIZE, groups, F) IQ_MATMUL_D(name, SIZE, groups, iq_d16, F)

#if defined(DT_AVX512)
// IQ_MATMUL_PAIRS is IQ_MATMUL for an i-quant whose decode rows pairs()
// unpacks into iq_pairs, and whose tiles groups() fills.
#define IQ_MATMUL_PAIRS_D(name, SIZE, pairs, groups, dfn, F)                                                    \
	IQ_TILED(name, SIZE, groups, dfn, F)                                                                        \
	IQ_ROWS(name, SIZE, iq_pairs u[1], pairs, iq_fsum512, dfn, F)                                               \
	IQ_ENTRY(name)
#define IQ_MATMUL_PAIRS(name, SIZE, pairs, groups, F) IQ_MATMUL_PAIRS_D(name, SIZE, pairs, groups, iq_d16, F)

// IQ_GROUPS_OF_PAIRS defines NAME, groups() from pairs().
#define IQ_GROUPS_OF_PAIRS(name, pairs)                                                                         \
	DT_INLINE void name(const uint8_t *wb, iq_group g[8]) {                                                     \
		iq_pairs p;                                                                                             \
		pairs(wb, &p);                                                                                          \
		iq_groups_of_pairs(&p, g);                                                                              \
	}
#endif

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
#define IQ_MATMUL_D(name, SIZE, groups, dfn, F) IQ_MATMUL(name, SIZE, groups, F)

#endif

#endif
