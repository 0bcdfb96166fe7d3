// Packed Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_1 and Q5_1 weights at the AVX2 level (without AVX-512):
// packed.c's layout with groups of 8 rows, one ymm of lanes, and the tiles
// that multiply them. packed.c runs them through the same chunks,
// activation tables and pieces as the AVX-512 tiles.
//
// Per row group and block of 32 columns:
//
//	Q8_0, 272 bytes: the 8 rows' f16 scales (16 bytes), then 8 vectors of
//	      32 bytes, vector g lane i = weights 4g..4g+3 of row i (signed,
//	      as in the file; plus 128 at avxvnni);
//	Q4_0, 144 bytes: the 8 scales, then 4 vectors, vector g lane i =
//	      nibble bytes 4g..4g+3 of row i (low nibbles weights 4g..4g+3,
//	      high ones 16+4g..16+4g+3, each q+8);
//	Q5_0, 176 bytes: Q4_0's 144, then the 8 rows' qh (u32, bit v the fifth
//	      bit of value v);
//	IQ4_NL, Q4_0's layout (its nibbles index kvalues_iq4nl);
//	Q4_1, 160 bytes: the 8 scales, the 8 minimums, then Q4_0's 4 vectors
//	      (values q, value q*d + m);
//	Q5_1, 192 bytes: Q4_1's 160, then the 8 rows' qh.
//
// The file's bytes, in another order. Without vpdpbusd, vpmaddubsw
// multiplies unsigned weight bytes by the signed activations broadcast to
// every lane and adds pairs into 16 bits: Q4_0's 0..15 and Q5_0's 0..31
// leave room to add several such vectors before vpmaddwd widens them
// (|q8| ≤ 127: a pair of Q4_0 products is at most 3,810, eight pairs
// 30,480; of Q5_0, 7,874 and four), so one widening serves a block or
// half of one rather than each vector. Q8_0's signed weights take ggml's
// sign trick (|w| times x with w's sign) and widen every vector. With
// AVX-VNNI (the avxvnni library) one vpdpbusd does a vector's multiply,
// pair sums and widening at once: p2_sum16 accumulates 32-bit sums there
// and p2_widen passes them through; the integers are the same. Q4_1's and
// Q5_1's values are Q4_0's and Q5_0's ranges.
//
// The integer dot of a block is exact and the float steps are the AVX-512
// tiles' (acc = fma(float(dot), dw*dx, acc), then for Q4_1 and Q5_1
// acc = fma(m, dx*sum(x), acc), block after block, pieces of
// PK_KC blocks added into out), so a row's result is the same bits at
// both levels and for any number of activation rows.
#ifndef DOVETAIL_PACKED_AVX2_H
#define DOVETAIL_PACKED_AVX2_H
#include "common.h"
#include "q8a.h"

#if defined(DT_AVX2) && !defined(DT_AVX512)

#define P2_ROWS 8
#define P2_NT 4 // activation rows a tile multiplies at once
#define P2_Q8_0 272
#define P2_Q4_0 144
#define P2_Q5_0 176
#define P2_Q4_1 160
#define P2_Q5_1 192

// p2_pack packs rows [0, rows) of a matrix (vecs vectors of 4-byte lanes a
// block: 8 for Q8_0, 4 for the others) whose GGUF blocks are bs bytes:
// heads f16 at their start (the scale, and Q4_1's and Q5_1's minimum),
// its values at offset vo and its fifth bits at qh (0: none), the values
// xored with flip (Q8_0's 0x80 at avxvnni: unsigned for vpdpbusd). Rows
// past the last take zero's block.
__attribute__((unused)) static void p2_pack(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols, int64_t bs,
                                            int64_t pb, int vecs, int heads, int vo, int qh, uint8_t flip,
                                            const uint8_t *zero) {
	const int64_t nb = cols / QK, groups = (rows + P2_ROWS - 1) / P2_ROWS;
	for (int64_t g = 0; g < groups; g++)
		for (int64_t b = 0; b < nb; b++) {
			uint8_t *d = dst + (g * nb + b) * pb;
			for (int i = 0; i < P2_ROWS; i++) {
				const int64_t r = g * P2_ROWS + i;
				const uint8_t *x = r < rows ? w + r * rb + b * bs : zero;
				for (int h = 0; h < heads; h++) memcpy(d + 16 * h + 2 * i, x + 2 * h, 2);
				uint8_t *v0 = d + 16 * heads;
				for (int v = 0; v < vecs; v++)
					for (int e = 0; e < 4; e++) v0[32 * v + 4 * i + e] = x[vo + 4 * v + e] ^ flip;
				if (qh) memcpy(v0 + 32 * vecs + 4 * i, x + qh, 4);
			}
		}
}

// p2_sum16 adds the unsigned weight vector w times the four activation
// bytes at x, broadcast, into s's 16-bit pair sums (with AVX-VNNI, its
// 32-bit lane sums).
DT_INLINE __m256i p2_sum16(__m256i s, __m256i w, const uint8_t *x) {
#if defined(DT_AVXVNNI)
	return _mm256_dpbusd_avx_epi32(s, w, _mm256_set1_epi32(ld32(x)));
#else
	return _mm256_add_epi16(s, _mm256_maddubs_epi16(w, _mm256_set1_epi32(ld32(x))));
#endif
}

// p2_widen is a lane's 16-bit pair sums added into 32 bits: the row's dot.
DT_INLINE __m256i p2_widen(__m256i s) {
#if defined(DT_AVXVNNI)
	return s;
#else
	return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
#endif
}

// p2_dot_signed adds |w| (aw) times xs (x with w's signs) into the 32-bit
// lane sums s: the sign trick's product of signed weights.
DT_INLINE __m256i p2_dot_signed(__m256i s, __m256i aw, __m256i xs) {
#if defined(DT_AVXVNNI)
	return _mm256_dpbusd_avx_epi32(s, aw, xs);
#else
	return _mm256_add_epi32(s, p2_widen(_mm256_maddubs_epi16(aw, xs)));
#endif
}

// p2_nibbles are the low and high nibbles of vector g of those at vs as
// bytes 0..15.
DT_INLINE void p2_nibbles(const uint8_t *vs, int g, __m256i *lo, __m256i *hi) {
	const __m256i m4 = _mm256_set1_epi8(0x0f), v = _mm256_loadu_si256((const __m256i *)(vs + 32 * g));
	*lo = _mm256_and_si256(v, m4);
	*hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

// p2_fifth adds 16 to the values of w (values 4G..4G+3 of each row) whose
// fifth bit is set in the rows' qh, H: lane i's bits 4G..4G+3 are in
// byte G/2 of its u32, nibble G%2.
DT_INLINE __m256i p2_fifth(__m256i w, __m256i H, int G) {
	const __m256i idx = _mm256_add_epi8(_mm256_set_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0, 0x0c0c0c0c, 0x08080808, 0x04040404, 0),
	                                    _mm256_set1_epi8((char)(G / 2)));
	const __m256i bits = _mm256_set1_epi32(G % 2 ? (int)0x80402010 : 0x08040201);
	const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(H, idx), bits), bits);
	return _mm256_add_epi8(w, _mm256_and_si256(set, _mm256_set1_epi8(16)));
}

// p2_dots4 is one Q4_0 block's (Q5 = 0) or Q5_0 block's (Q5 = 1) exact
// integer dots, the rows' in lanes, for NT activation rows at x (as
// pk_prep lays them out: 32 bytes a row) with their table entries at t,
// each started at its entry's c; with MIN, Q4_1's or Q5_1's, at 0.
DT_INLINE void p2_dots4(const int NT, const int Q5, const int MIN, const uint8_t *pb, const uint8_t *x, const q8a *t,
                        __m256i s32[P2_NT]) {
	const uint8_t *vs = pb + (MIN ? 32 : 16);
	__m256i s16[P2_NT];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) s32[j] = MIN ? _mm256_setzero_si256() : _mm256_set1_epi32(t[j].c), s16[j] = _mm256_setzero_si256();
	const __m256i H = Q5 ? _mm256_loadu_si256((const __m256i *)(vs + 128)) : _mm256_setzero_si256();
	#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		__m256i lo, hi;
		p2_nibbles(vs, g, &lo, &hi);
		if (Q5) lo = p2_fifth(lo, H, g), hi = p2_fifth(hi, H, g + 4);
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			s16[j] = p2_sum16(s16[j], lo, x + j * QK + 4 * g);
			s16[j] = p2_sum16(s16[j], hi, x + j * QK + 16 + 4 * g);
		}
		// Q5_0's values reach 31: widen after every four vectors.
		if (Q5 && g % 2 == 1) {
			#pragma GCC unroll 4
			for (int j = 0; j < NT; j++) s32[j] = _mm256_add_epi32(s32[j], p2_widen(s16[j])), s16[j] = _mm256_setzero_si256();
		}
	}
	if (!Q5) {
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) s32[j] = _mm256_add_epi32(s32[j], p2_widen(s16[j]));
	}
}

// p2_dots8 is p2_dots4 for a Q8_0 block: signed weights by the sign trick
// (start values 0), or at avxvnni unsigned ones (w+128, started at the
// table's -128·sum) straight to vpdpbusd.
DT_INLINE void p2_dots8(const int NT, const uint8_t *pb, const uint8_t *x, const q8a *t, __m256i s32[P2_NT]) {
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) s32[j] = _mm256_set1_epi32(t[j].c);
	#pragma GCC unroll 8
	for (int g = 0; g < 8; g++) {
		const __m256i w = _mm256_loadu_si256((const __m256i *)(pb + 16 + 32 * g));
#if defined(DT_AVXVNNI)
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) s32[j] = p2_sum16(s32[j], w, x + j * QK + 4 * g);
#else
		const __m256i aw = _mm256_abs_epi8(w);
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++)
			s32[j] = p2_dot_signed(s32[j], aw, _mm256_sign_epi8(_mm256_set1_epi32(ld32(x + j * QK + 4 * g)), w));
#endif
	}
}

// p2_dotsnl is p2_dots4 for an IQ4_NL block: each nibble made its value
// by a vpshufb, then multiplied as Q8_0's (signed by the sign trick; at
// avxvnni plus 128, straight to vpdpbusd).
DT_INLINE void p2_dotsnl(const int NT, const uint8_t *pb, const uint8_t *x, const q8a *t, __m256i s32[P2_NT]) {
#if defined(DT_AVXVNNI)
	const __m256i lut = _mm256_broadcastsi128_si256(iq4_lut_u());
#else
	const __m256i lut = _mm256_broadcastsi128_si256(iq4_lut());
#endif
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) s32[j] = _mm256_set1_epi32(t[j].c);
	#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		__m256i w[2];
		p2_nibbles(pb + 16, g, &w[0], &w[1]);
		#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			const __m256i v = _mm256_shuffle_epi8(lut, w[h]);
			const int64_t off = 16 * h + 4 * g;
#if defined(DT_AVXVNNI)
			#pragma GCC unroll 4
			for (int j = 0; j < NT; j++) s32[j] = p2_sum16(s32[j], v, x + j * QK + off);
#else
			const __m256i av = _mm256_abs_epi8(v);
			#pragma GCC unroll 4
			for (int j = 0; j < NT; j++)
				s32[j] = p2_dot_signed(s32[j], av, _mm256_sign_epi8(_mm256_set1_epi32(ld32(x + j * QK + off)), v));
#endif
		}
	}
}

// p2_store writes (or adds) a tile's output lanes, the group's first rows.
DT_INLINE void p2_store(float *out, int rows, __m256 v, int add) {
	const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	if (add) v = _mm256_add_ps(v, _mm256_maskload_ps(out, m));
	_mm256_maskstore_ps(out, m, v);
}

// p2_tile multiplies one group (at its block b0) by NT ≤ P2_NT activation
// rows over nbc blocks: KIND 0 Q8_0, 1 Q4_0, 2 Q5_0, 3 IQ4_NL, 4 Q4_1,
// 5 Q5_1. xp and tt are the tile's activations and table as packed.c's
// pk_prep lays them out (block after block, the rows one after another).
DT_INLINE void p2_tile(const int NT, const int KIND, const uint8_t *pg, int rows, int64_t b0, int64_t nbc, const uint8_t *xp,
                       const q8a *tt, float *out, int64_t ldo, int add) {
	const int64_t PB = KIND == 0 ? P2_Q8_0 : KIND == 2 ? P2_Q5_0 : KIND == 4 ? P2_Q4_1 : KIND == 5 ? P2_Q5_1 : P2_Q4_0;
	const int MIN = KIND >= 4;
	__m256 acc[P2_NT];
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
	const uint8_t *pb = pg;
	for (int64_t b = 0; b < nbc; b++, pb += PB) {
		#pragma GCC unroll 5
		for (int k = 0; k < PB; k += 64) _mm_prefetch((const char *)pb + 4096 + k, _MM_HINT_T0);
		const uint8_t *x = xp + (b0 + b) * NT * QK;
		const q8a *t = tt + (b0 + b) * NT;
		__m256i s[P2_NT];
		if (KIND == 0)
			p2_dots8(NT, pb, x, t, s);
		else if (KIND == 3)
			p2_dotsnl(NT, pb, x, t, s);
		else
			p2_dots4(NT, KIND == 2 || KIND == 5, MIN, pb, x, t, s);
		const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pb));
		const __m256 mw = MIN ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 16))) : dw;
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const q8a e = t[j];
			acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), _mm256_mul_ps(dw, _mm256_set1_ps(e.d)), acc[j]);
			if (MIN) acc[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(e.s), acc[j]);
		}
	}
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) p2_store(out + j * ldo, rows, acc[j], add);
}

typedef void (*p2_fn)(const uint8_t *pg, int rows, int64_t b0, int64_t nbc, const uint8_t *xp, const q8a *tt,
                      float *out, int64_t ldo, int add);

#define P2_FN(KIND, NT)                                                                                          \
	static void p2_tile_##KIND##_##NT(const uint8_t *pg, int rows, int64_t b0, int64_t nbc, const uint8_t *xp,    \
	                                  const q8a *tt, float *out, int64_t ldo, int add) {                          \
		p2_tile(NT, KIND, pg, rows, b0, nbc, xp, tt, out, ldo, add);                                             \
	}
#define P2_FNS(KIND)                                                                                             \
	P2_FN(KIND, 1) P2_FN(KIND, 2) P2_FN(KIND, 3) P2_FN(KIND, 4)                                                  \
	static p2_fn const p2_tiles_##KIND[P2_NT + 1] = {0, p2_tile_##KIND##_1, p2_tile_##KIND##_2, p2_tile_##KIND##_3, \
	                                                 p2_tile_##KIND##_4};
P2_FNS(0)
P2_FNS(1)
P2_FNS(2)
P2_FNS(3)
P2_FNS(4)
P2_FNS(5)

#endif
#endif
