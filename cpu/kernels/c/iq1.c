// IQ1_S and IQ1_M weights × Q8_K activations (IQ1_S and IQ1_M files, and
// the 1.58-bit mixes of large models). Per 8 values an 11-bit index into
// iq1s_grid (8 values of -1, 0 or 1), shifted by a delta of ±1/8, and 3-bit
// scales:
//
//	IQ1_S (50 bytes): d (f16), qs[32] the indices' low 8 bits, then per
//	      32 values a u16: three 3-bit index tops, a 3-bit scale s, the
//	      delta's sign (bit 15): d·(2s+1)·(g ± 1/8);
//	IQ1_M (56 bytes): qs[32], qh[16] (per 8 values a nibble: the index's
//	      top 3 bits and the delta's sign), scales[8] (four u16: per 16
//	      values a 3-bit scale, and in their top nibbles the f16 d).
//
// Each value is summed as the integer 8g ± 1 (magnitudes 1, 7 or 9 and a
// sign, as iq.h's groups hold them), the super-block's sum times 1/8: the
// exact sums quant.DotIQ1_*Q8_K make. Grid copied from ggml-common.h
// (iq_grids.c).
#include "iq.h"

#define IQ1_S_SIZE 50
#define IQ1_M_SIZE 56

extern const uint64_t dt_iq1s_grid[2048];

// iq1_m_d is an IQ1_M super-block's scale: an f16 in the top nibbles of
// its four scale words.
DT_INLINE float iq1_m_d(const uint8_t *wb) {
	const uint8_t *s = wb + 48;
	const uint16_t u = (uint16_t)((ld16(s) >> 12) | ((ld16(s + 2) >> 8) & 0xf0) | ((ld16(s + 4) >> 4) & 0xf00) | (ld16(s + 6) & 0xf000));
	return f16_to_f32(u);
}

// iq1_m_scale is IQ1_M's 2s+1 of the 16 values half h of group ib.
DT_INLINE int iq1_m_scale(const uint8_t *wb, int ib, int h) {
	return 2 * ((ld16(wb + 48 + 2 * (ib / 2)) >> (6 * (ib % 2) + 3 * h)) & 7) + 1;
}

#if defined(DT_AVX2)

// iq1_group is a 32-value group of the grid entries e[0..3], entry l's
// delta -1/8 where bit l of neg is set: the values 8g ± 1 as magnitudes
// and signs.
DT_INLINE void iq1_group(iq_group *g, const uint64_t e[4], int neg, int ls1, int ls2) {
	const long long plus = 0x0101010101010101ll, minus = -1;
	const __m256i grid = _mm256_set_epi64x((long long)e[3], (long long)e[2], (long long)e[1], (long long)e[0]);
	// 8g a byte at a time: the 16-bit shift's carries into the next byte
	// masked off.
	const __m256i eight = _mm256_and_si256(_mm256_slli_epi16(grid, 3), _mm256_set1_epi8((char)0xf8));
	const __m256i delta = _mm256_set_epi64x(neg & 8 ? minus : plus, neg & 4 ? minus : plus, neg & 2 ? minus : plus,
	                                        neg & 1 ? minus : plus);
	const __m256i v = _mm256_add_epi8(eight, delta);
	g->q = _mm256_abs_epi8(v);
#if defined(DT_AVX512)
	g->neg = _mm256_movepi8_mask(v);
#else
	g->neg = v; // never 0: its sign is the value's (iq_signed)
#endif
	g->sc = iq_scales(ls1, ls2);
}

// iq1_index_words makes a super-block's 32 grid indices: the low bytes lo
// (32 in entry order) and the top bits, entries 0..15 in top0's bytes and
// 16..31 in top1's, paired into little-endian words.
DT_INLINE void iq1_index_words(uint16_t ix[32], const uint8_t *lo, __m128i top0, __m128i top1) {
	const __m128i q0 = _mm_loadu_si128((const __m128i *)lo), q1 = _mm_loadu_si128((const __m128i *)(lo + 16));
	_mm_store_si128((__m128i *)ix, _mm_unpacklo_epi8(q0, top0));
	_mm_store_si128((__m128i *)(ix + 8), _mm_unpackhi_epi8(q0, top0));
	_mm_store_si128((__m128i *)(ix + 16), _mm_unpacklo_epi8(q1, top1));
	_mm_store_si128((__m128i *)(ix + 24), _mm_unpackhi_epi8(q1, top1));
}

// iq1_s_groups takes a super-block's indices in vectors too: entry 4ib+l's
// top bits are bits 3l.. of group ib's u16, gathered into bytes in entry
// order and paired with the low bytes (iq1_index_words).
DT_INLINE void iq1_s_groups(const uint8_t *wb, iq_group g[8]) {
	const __m128i h = _mm_loadu_si128((const __m128i *)(wb + 34)), m7 = _mm_set1_epi16(7);
	__m128i t[4];
	for (int l = 0; l < 4; l++) {
		const __m128i w = _mm_and_si128(_mm_srli_epi16(h, 3 * l), m7);
		t[l] = _mm_packus_epi16(w, w); // bytes 0..7: group ib's
	}
	const __m128i x = _mm_unpacklo_epi8(t[0], t[1]), y = _mm_unpacklo_epi8(t[2], t[3]);
	const __m128i z0 = _mm_unpacklo_epi16(x, y), z1 = _mm_unpackhi_epi16(x, y); // entries 0..15, 16..31
	uint16_t ix[32] __attribute__((aligned(16)));
	iq1_index_words(ix, wb + 2, z0, z1);
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
		const int hb = ld16(wb + 34 + 2 * ib), ls = 2 * ((hb >> 12) & 7) + 1;
		uint64_t e[4];
		for (int l = 0; l < 4; l++) e[l] = dt_iq1s_grid[ix[4 * ib + l]];
		iq1_group(&g[ib], e, hb & 0x8000 ? 15 : 0, ls, ls);
	}
}

// iq1_m_groups takes a super-block's indices and delta signs from its qh
// nibbles in vectors: index k is the little-endian word of the bytes qs[k]
// and nibble k & 7.
DT_INLINE void iq1_m_groups(const uint8_t *wb, iq_group g[8]) {
	const __m128i qh = _mm_loadu_si128((const __m128i *)(wb + 32)), m4 = _mm_set1_epi8(15), m7 = _mm_set1_epi8(7);
	const __m128i lo = _mm_and_si128(qh, m4), hi = _mm_and_si128(_mm_srli_epi16(qh, 4), m4);
	const __m128i n0 = _mm_unpacklo_epi8(lo, hi), n1 = _mm_unpackhi_epi8(lo, hi); // entries 0..15, 16..31
	uint16_t ix[32] __attribute__((aligned(16)));
	iq1_index_words(ix, wb, _mm_and_si128(n0, m7), _mm_and_si128(n1, m7));
	// Bit 3 of each nibble, moved to its byte's top bit.
	const uint32_t neg = (uint32_t)_mm_movemask_epi8(_mm_slli_epi16(n0, 4)) | (uint32_t)_mm_movemask_epi8(_mm_slli_epi16(n1, 4)) << 16;
	#pragma GCC unroll 8
	for (int ib = 0; ib < 8; ib++) {
		uint64_t e[4];
		for (int l = 0; l < 4; l++) e[l] = dt_iq1s_grid[ix[4 * ib + l]];
		iq1_group(&g[ib], e, (int)(neg >> (4 * ib)) & 15, iq1_m_scale(wb, ib, 0), iq1_m_scale(wb, ib, 1));
	}
}

#if defined(DT_AVX512)
// iq1_pairs makes a super-block's pairs from its 32 grid indices (idx, words
// in value order), the entries whose delta is -1/8 (bit k of neg: entry k)
// and its 16 scales ls (word 2ib+h: group ib's half h): the values 8g ± 1 as
// magnitudes and signs. The entries are loaded one by one into a buffer and
// read back as vectors (vpgatherdq took a third longer:
// docs/measurements/kernels-i-quants.md, "IQ1_S and IQ1_M").
DT_INLINE void iq1_pairs(__m512i idx, uint32_t neg, __m256i ls, iq_pairs *p) {
	const __m512i plus = _mm512_set1_epi8(1), minus = _mm512_set1_epi8(-1), m8 = _mm512_set1_epi8((char)0xf8);
	uint16_t ix[32] __attribute__((aligned(64)));
	uint64_t ge[32] __attribute__((aligned(64)));
	_mm512_store_si512(ix, idx);
	#pragma GCC unroll 32
	for (int e = 0; e < 32; e++) ge[e] = dt_iq1s_grid[ix[e]];
	#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) {
		const __m512i g = _mm512_load_si512(ge + 8 * k);
		const __m512i eight = _mm512_and_si512(_mm512_slli_epi16(g, 3), m8);
		const __mmask64 m = _cvtu64_mask64(_pdep_u64((neg >> (8 * k)) & 0xff, 0x0101010101010101ull) * 0xff);
		const __m512i v = _mm512_add_epi8(eight, _mm512_mask_blend_epi8(m, plus, minus));
		p->q[k] = _mm512_abs_epi8(v);
		p->neg[k] = _mm512_movepi8_mask(v);
	}
	iq_pair_spread16(ls, p);
}

DT_INLINE void iq1_s_pairs(const uint8_t *wb, iq_pairs *p) {
	// Group ib's u16 h for each of its four entries (word 4ib+l), shifted
	// 3l: the index's top bits.
	const __m512i h = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(wb + 34)));
	const __m512i hw = _mm512_permutexvar_epi16(_mm512_srli_epi16(iq_word_ramp(), 2), h);
	const __m512i top = _mm512_and_si512(_mm512_srlv_epi16(hw, _mm512_set1_epi64(0x0009000600030000ll)),
	                                     _mm512_set1_epi16(7));
	const __m512i idx = _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(wb + 2))), _mm512_slli_epi16(top, 8));
	// Bit 15 of group ib's word: all four entries' delta.
	const uint32_t gneg = _cvtmask32_u32(_mm512_movepi16_mask(h)) & 0xff;
	const uint32_t neg = _pdep_u32(gneg, 0x11111111u) * 0xf;
	// Both halves of group ib take its 2s+1.
	const __m128i s = _mm_and_si128(_mm_srli_epi16(_mm512_castsi512_si128(h), 12), _mm_set1_epi16(7));
	const __m128i ls8 = _mm_add_epi16(_mm_add_epi16(s, s), _mm_set1_epi16(1));
	const __m256i ls = _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), _mm256_castsi128_si256(ls8));
	iq1_pairs(idx, neg, ls, p);
}

DT_INLINE void iq1_m_pairs(const uint8_t *wb, iq_pairs *p) {
	// Entry k's nibble: qh byte k/2, low half for even k.
	const __m128i qh = _mm_loadu_si128((const __m128i *)(wb + 32)), m4 = _mm_set1_epi8(15);
	const __m128i lo = _mm_and_si128(qh, m4), hi = _mm_and_si128(_mm_srli_epi16(qh, 4), m4);
	const __m256i nib = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
	const __m512i top = _mm512_cvtepu8_epi16(_mm256_and_si256(nib, _mm256_set1_epi8(7)));
	const __m512i idx = _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)wb)), _mm512_slli_epi16(top, 8));
	const uint32_t neg = _cvtmask32_u32(_mm256_test_epi8_mask(nib, _mm256_set1_epi8(8)));
	// Scale t = 2ib+h: bits 3(t%4).. of word t/4.
	const __m256i w = _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
	                                           _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(wb + 48))));
	const __m256i s = _mm256_and_si256(_mm256_srlv_epi16(w, _mm256_set1_epi64x(0x0009000600030000ll)),
	                                   _mm256_set1_epi16(7));
	iq1_pairs(idx, neg, _mm256_add_epi16(_mm256_add_epi16(s, s), _mm256_set1_epi16(1)), p);
}
#endif

#else

// iq1_m_index is the grid index of IQ1_M's 8 values l (0..3) of group ib,
// and iq1_m_neg whether their delta is -1/8 (the SIMD levels take both
// from whole vectors).
DT_INLINE int iq1_m_index(const uint8_t *wb, int ib, int l) {
	return wb[4 * ib + l] | ((wb[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 7) << 8;
}
DT_INLINE int iq1_m_neg(const uint8_t *wb, int ib, int l) { return (wb[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 8; }

// iq1_s_index is IQ1_S's: the low byte, and three bits of the group's u16.
DT_INLINE int iq1_s_index(const uint8_t *wb, int ib, int l) {
	return wb[2 + 4 * ib + l] | ((ld16(wb + 34 + 2 * ib) >> (3 * l)) & 7) << 8;
}

// iq1_sum8 is Σ (8g ± 1)·q8 over the 8 values of grid entry e.
static int32_t iq1_sum8(uint64_t e, int neg, const int8_t *q8) {
	int32_t s = 0;
	for (int j = 0; j < 8; j++) s += (8 * (int8_t)(e >> (8 * j)) + (neg ? -1 : 1)) * q8[j];
	return s;
}

// iq1_s_sum and iq1_m_sum are a super-block's integer sum, Σ over its
// scales of scale·Σ (8g ± 1)·q8, as quant.iq1SSum and quant.iq1MSum take it.
static int32_t iq1_s_sum(const uint8_t *w, const int8_t *q8) {
	int32_t bsum = 0;
	for (int ib = 0; ib < 8; ib++) {
		const int h = ld16(w + 34 + 2 * ib);
		int32_t sumi = 0;
		for (int l = 0; l < 4; l++) sumi += iq1_sum8(dt_iq1s_grid[iq1_s_index(w, ib, l)], h & 0x8000, q8 + 32 * ib + 8 * l);
		bsum += sumi * (2 * ((h >> 12) & 7) + 1);
	}
	return bsum;
}

static int32_t iq1_m_sum(const uint8_t *w, const int8_t *q8) {
	int32_t bsum = 0;
	for (int ib = 0; ib < 8; ib++)
		for (int h = 0; h < 2; h++) {
			int32_t sumi = 0;
			for (int l = 2 * h; l < 2 * h + 2; l++)
				sumi += iq1_sum8(dt_iq1s_grid[iq1_m_index(w, ib, l)], iq1_m_neg(w, ib, l), q8 + 32 * ib + 8 * l);
			bsum += sumi * iq1_m_scale(w, ib, h);
		}
	return bsum;
}

// dot_iq1 mirrors quant.dotIQ1: IQ1_M's super-blocks (M) or IQ1_S's.
DT_INLINE float dot_iq1(const int M, const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += M ? IQ1_M_SIZE : IQ1_S_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		const int32_t bsum = M ? iq1_m_sum(w, q8) : iq1_s_sum(w, q8);
		sumf += (M ? iq1_m_d(w) : f16_to_f32(ld16(w))) * ldf(x) * (float)bsum;
	}
	return 0.125f * sumf;
}

static float dot_iq1_s(const uint8_t *w, const uint8_t *x, int64_t nb) { return dot_iq1(0, w, x, nb); }
static float dot_iq1_m(const uint8_t *w, const uint8_t *x, int64_t nb) { return dot_iq1(1, w, x, nb); }

#endif

#if defined(DT_AVX512)
// The tiles (iqtile.h) unpack IQ1_M's groups from its pairs, IQ1_S's one by
// one: the faster of the two for each (docs/measurements/kernels-i-quants.md,
// "IQ1_S and IQ1_M").
IQ_GROUPS_OF_PAIRS(iq1_m_groups512, iq1_m_pairs)
IQ_MATMUL_PAIRS(iq1_s, IQ1_S_SIZE, iq1_s_pairs, iq1_s_groups, 0.125f)
IQ_MATMUL_PAIRS_D(iq1_m, IQ1_M_SIZE, iq1_m_pairs, iq1_m_groups512, iq1_m_d, 0.125f)
#else
IQ_MATMUL(iq1_s, IQ1_S_SIZE, iq1_s_groups, 0.125f)
IQ_MATMUL_D(iq1_m, IQ1_M_SIZE, iq1_m_groups, iq1_m_d, 0.125f)
#endif
