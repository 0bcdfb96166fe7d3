// Packed Q2_K to Q6_K and IQ4_XS at the AVX2 level (without AVX-512):
// packed_k.c's layouts with groups of 8 rows (every 64-byte vector there
// a 32-byte one here), and the tiles that multiply them by up to 4
// activation rows.
//
// The integer products come from vpmaddubsw (unsigned weight bytes times
// the signed Q8_K activations, pairs added into 16 bits; packed_avx2.h's
// p2_sum16, vpdpbusd with AVX-VNNI): Q4_K's 0..15 take a whole 32-value
// sub-block in 16 bits before one vpmaddwd widens it (eight pairs of at
// most 2·15·127), Q5_K's 0..31 half of one, Q6_K's 0..63 two vectors. The float steps, and the
// order of the sub-blocks, are packed_k.c's AVX-512 tiles', so a row's
// result is the same bits at both levels and for any number of rows.
#ifndef DOVETAIL_PACKED_K_AVX2_H
#define DOVETAIL_PACKED_K_AVX2_H
#include "common.h"
#include "packed_avx2.h"

#if defined(DT_AVX2) && !defined(DT_AVX512)

#define P2K_ROWS 8
#define P2K_NT 4
#define P2K_AHEAD 4096 // bytes of the packed stream prefetched ahead

// p2k_scales unpacks the 6-bit scale and min of sub-block s of Q4_K or
// Q5_K for every row (lane) from scale bytes 0..3 (A), 4..7 (B), 8..11 (C).
DT_INLINE void p2k_scales(int s, __m256i A, __m256i B, __m256i C, __m256i *sc, __m256i *m) {
	const __m256i m6 = _mm256_set1_epi32(63), m2 = _mm256_set1_epi32(3), m4 = _mm256_set1_epi32(15);
	if (s < 4) {
		*sc = _mm256_and_si256(_mm256_srli_epi32(A, 8 * s), m6);
		*m = _mm256_and_si256(_mm256_srli_epi32(B, 8 * s), m6);
	} else {
		const int t = s - 4;
		*sc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(C, 8 * t), m4),
		                      _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(A, 8 * t + 6), m2), 4));
		*m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(C, 8 * t + 4), m4),
		                     _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(B, 8 * t + 6), m2), 4));
	}
}

// p2k_rows_add adds the NT rows' super-block sums t, times their scales,
// into acc; p2k_offsets then takes the super-block's offsets off: per row
// the pairs of 16-bit factors in cp (mins, or scales) against the
// activations' 16-value sums, times f (dmin, or 32·d) and the row's scale.
DT_INLINE void p2k_rows_add(const int NT, __m256 acc[P2K_NT], const __m256 t[P2K_NT], const float dy[P2K_NT]) {
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) acc[j] = _mm256_fmadd_ps(t[j], _mm256_set1_ps(dy[j]), acc[j]);
}

DT_INLINE void p2k_offsets(const int NT, __m256 acc[P2K_NT], const __m256i cp[8], __m256 f, const float dy[P2K_NT],
                           const uint8_t *x, int64_t arb) {
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) {
		const uint8_t *y = x + j * arb;
		__m256i ci = _mm256_setzero_si256();
		#pragma GCC unroll 8
		for (int u = 0; u < 8; u++) ci = _mm256_add_epi32(ci, _mm256_madd_epi16(cp[u], _mm256_set1_epi32(ld32(y + 260 + 4 * u))));
		acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ci), _mm256_mul_ps(f, _mm256_set1_ps(dy[j])), acc[j]);
	}
}

// What every tile does around its super-blocks: p2k_zero clears the NT
// rows' accumulators; p2k_fetch asks for the packed stream ahead of
// super-block pb (psize bytes) and returns its 8 rows' scales d;
// p2k_rows reads the NT activation rows' scales and clears their
// super-block sums; p2k_finish writes the NT rows' output lanes, the
// group's first rows.
DT_INLINE void p2k_zero(const int NT, __m256 v[P2K_NT]) {
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) v[j] = _mm256_setzero_ps();
}

DT_INLINE __m256 p2k_fetch(const uint8_t *pb, int psize) {
	for (int k = 0; k < psize; k += 64) _mm_prefetch((const char *)pb + P2K_AHEAD + k, _MM_HINT_T0);
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)pb));
}

DT_INLINE void p2k_rows(const int NT, const uint8_t *y, int64_t arb, float dy[P2K_NT], __m256 t[P2K_NT]) {
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) dy[j] = ldf(y + j * arb);
	p2k_zero(NT, t);
}

DT_INLINE void p2k_finish(const int NT, const __m256 acc[P2K_NT], int rows, float *out, int64_t ldo) {
	const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	#pragma GCC unroll 4
	for (int j = 0; j < NT; j++) _mm256_maskstore_ps(out + j * ldo, m, acc[j]);
}

// p2k45_tile multiplies a packed Q4_K (Q5 = 0) or Q5_K group by NT
// activation rows over nb super-blocks. Layout (8 rows): d[8], dmin[8]
// f16; scale bytes 0..3, 4..7, 8..11 (3 vectors); Q5_K's qh transposed
// (8 vectors); qs transposed (32 vectors).
DT_INLINE void p2k45_tile(const int NT, const int Q5, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act,
                          int64_t arb, float *out, int64_t ldo) {
	const int psize = P2K_ROWS * (Q5 ? Q5_K_SIZE : Q4_K_SIZE);
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m256 acc[P2K_NT];
	p2k_zero(NT, acc);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * psize, *y = act + b * Q8_K_SIZE;
		const __m256 d = p2k_fetch(pb, psize);
		const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 16)));
		const __m256i A = _mm256_loadu_si256((const __m256i *)(pb + 32)), B = _mm256_loadu_si256((const __m256i *)(pb + 64)),
		              C = _mm256_loadu_si256((const __m256i *)(pb + 96));
		const uint8_t *qh = pb + 128, *qs = pb + 128 + (Q5 ? 256 : 0);
		__m256 scf[8];
		__m256i mp[8];
		#pragma GCC unroll 8
		for (int s = 0; s < 8; s++) {
			__m256i sc, m;
			p2k_scales(s, A, B, C, &sc, &m);
			scf[s] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
			mp[s] = _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
		}
		float dy[P2K_NT];
		__m256 t[P2K_NT];
		p2k_rows(NT, y, arb, dy, t);
		#pragma GCC unroll 1
		for (int s = 0; s < 8; s++) { // sub-block s: chunk s/2's low nibbles, then high
			const int k = s / 2, h = s % 2;
			const __m256i bit = _mm256_set1_epi8((char)(1 << s));
			__m256i s16[P2K_NT], s32[P2K_NT];
			#pragma GCC unroll 4
			for (int j = 0; j < NT; j++) s16[j] = s32[j] = _mm256_setzero_si256();
			#pragma GCC unroll 8
			for (int v = 0; v < 8; v++) {
				const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (8 * k + v)));
				__m256i w = _mm256_and_si256(h ? _mm256_srli_epi16(q, 4) : q, m4);
				if (Q5) {
					const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(qh + 32 * v)), bit), bit);
					w = _mm256_or_si256(w, _mm256_and_si256(set, _mm256_set1_epi8(16)));
				}
				#pragma GCC unroll 4
				for (int j = 0; j < NT; j++) s16[j] = p2_sum16(s16[j], w, y + j * arb + 4 + 32 * s + 4 * v);
				if (Q5 && v == 3) { // Q5_K's values reach 31: widen after four vectors
					#pragma GCC unroll 4
					for (int j = 0; j < NT; j++) s32[j] = p2_widen(s16[j]), s16[j] = _mm256_setzero_si256();
				}
			}
			#pragma GCC unroll 4
			for (int j = 0; j < NT; j++)
				t[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s32[j], p2_widen(s16[j]))), scf[s], t[j]);
		}
		p2k_rows_add(NT, acc, t, dy);
		p2k_offsets(NT, acc, mp, dmin, dy, y, arb);
	}
	p2k_finish(NT, acc, rows, out, ldo);
}

// p2k_q6 builds the unsigned 6-bit quants of quarter qi of a Q6_K half for
// every row (packed_k.c's q6_quant at this width).
DT_INLINE __m256i p2k_q6(int qi, __m256i Tq, __m256i Th) {
	const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
	const __m256i lo = qi < 2 ? _mm256_and_si256(Tq, m4) : _mm256_and_si256(_mm256_srli_epi16(Tq, 4), m4);
	const __m256i hi = qi == 0 ? _mm256_slli_epi16(Th, 4) : qi == 1 ? _mm256_slli_epi16(Th, 2) : qi == 2 ? Th : _mm256_srli_epi16(Th, 2);
	return _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
}

// p2k6_tile is p2k45_tile for Q6_K. Layout (8 rows): d[8] f16; the scales
// (vector u = scale bytes 4u..4u+3); qh transposed, halves 0 and 1 (8
// vectors each); ql transposed, per half its two 32-byte parts.
DT_INLINE void p2k6_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, int64_t arb,
                         float *out, int64_t ldo) {
	const int psize = P2K_ROWS * Q6_K_SIZE;
	__m256 acc[P2K_NT];
	p2k_zero(NT, acc);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * psize, *y = act + b * Q8_K_SIZE;
		const __m256 d = p2k_fetch(pb, psize);
		__m256 scf[16];
		__m256i cp[8];
		#pragma GCC unroll 4
		for (int u = 0; u < 4; u++) {
			const __m256i G = _mm256_loadu_si256((const __m256i *)(pb + 16 + 32 * u));
			const __m256i s0 = _mm256_srai_epi32(_mm256_slli_epi32(G, 24), 24), s1 = _mm256_srai_epi32(_mm256_slli_epi32(G, 16), 24);
			const __m256i s2 = _mm256_srai_epi32(_mm256_slli_epi32(G, 8), 24), s3 = _mm256_srai_epi32(G, 24);
			scf[4 * u] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s0));
			scf[4 * u + 1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s1));
			scf[4 * u + 2] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s2));
			scf[4 * u + 3] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s3));
			cp[2 * u] = _mm256_or_si256(_mm256_and_si256(s0, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s1, 16));
			cp[2 * u + 1] = _mm256_or_si256(_mm256_and_si256(s2, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s3, 16));
		}
		float dy[P2K_NT];
		__m256 t[P2K_NT];
		p2k_rows(NT, y, arb, dy, t);
		// The sub-blocks in the AVX-512 tile's order (its sums round the same).
		#pragma GCC unroll 1
		for (int h = 0; h < 2; h++)
			#pragma GCC unroll 1
			for (int part = 0; part < 2; part++)
				#pragma GCC unroll 2
				for (int up = 0; up < 2; up++) {
					const int qi = part + 2 * up;
					#pragma GCC unroll 2
					for (int e = 0; e < 2; e++) { // the quarter's two 16-value sub-blocks
						__m256i p0[P2K_NT], p1[P2K_NT];
						#pragma GCC unroll 4
						for (int j = 0; j < NT; j++) p0[j] = p1[j] = _mm256_setzero_si256();
						#pragma GCC unroll 4
						for (int v = 0; v < 4; v++) {
							const int V = 4 * e + v;
							const __m256i w = p2k_q6(qi, _mm256_loadu_si256((const __m256i *)(pb + 656 + 256 * (2 * h + part) + 32 * V)),
							                         _mm256_loadu_si256((const __m256i *)(pb + 144 + 256 * h + 32 * V)));
							#pragma GCC unroll 4
							for (int j = 0; j < NT; j++) {
								const uint8_t *x = y + j * arb + 4 + 128 * h + 32 * qi + 16 * e + 4 * v;
								if (v < 2)
									p0[j] = p2_sum16(p0[j], w, x);
								else
									p1[j] = p2_sum16(p1[j], w, x);
							}
						}
						const int i = 8 * h + 2 * qi + e;
						#pragma GCC unroll 4
						for (int j = 0; j < NT; j++) {
							const __m256i S = _mm256_add_epi32(p2_widen(p0[j]), p2_widen(p1[j]));
							t[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), scf[i], t[j]);
						}
					}
				}
		p2k_rows_add(NT, acc, t, dy);
		p2k_offsets(NT, acc, cp, _mm256_mul_ps(d, _mm256_set1_ps(32)), dy, y, arb);
	}
	p2k_finish(NT, acc, rows, out, ldo);
}

// p2k_sub16 adds 32 values' products, two 16-value groups each with a
// scale of its own (Q2_K, Q3_K), into the NT rows' sums t: w(v) the 8
// weight vectors (values 0..7: a group's four fit 16 bits), x the first
// row's 32 quants.
#define P2K_SUB16(NT, t, w, sc0, sc1, x, arb)                                                                  \
	do {                                                                                                        \
		__m256i g0_[P2K_NT], g1_[P2K_NT];                                                                       \
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) g0_[j] = g1_[j] = _mm256_setzero_si256();         \
		_Pragma("GCC unroll 8") for (int v = 0; v < 8; v++) {                                                  \
			const __m256i wv_ = (w);                                                                            \
			_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {                                             \
				if (v < 4)                                                                                      \
					g0_[j] = p2_sum16(g0_[j], wv_, (x) + j * (arb) + 4 * v);                                   \
				else                                                                                            \
					g1_[j] = p2_sum16(g1_[j], wv_, (x) + j * (arb) + 4 * v);                                   \
			}                                                                                                   \
		}                                                                                                       \
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {                                                 \
			t[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p2_widen(g0_[j])), (sc0), t[j]);                         \
			t[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p2_widen(g1_[j])), (sc1), t[j]);                         \
		}                                                                                                       \
	} while (0)

// p2k2_tile is Q2_K's: the 2-bit values times each 16 values' 4-bit
// scale, the mins (the scale bytes' high nibbles) through the
// activations' 16-value sums. Layout (8 rows): d[8], dmin[8] f16; the
// scale bytes (vector u = bytes 4u..4u+3); qs transposed (2 × 8 vectors).
DT_INLINE void p2k2_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, int64_t arb,
                         float *out, int64_t ldo) {
	const int psize = P2K_ROWS * Q2_K_SIZE;
	const __m256i m3 = _mm256_set1_epi8(3);
	__m256 acc[P2K_NT];
	p2k_zero(NT, acc);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * psize, *y = act + b * Q8_K_SIZE;
		const __m256 d = p2k_fetch(pb, psize);
		const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + 16)));
		__m256 scf[16];
		__m256i mp[8];
		#pragma GCC unroll 4
		for (int u = 0; u < 4; u++) {
			const __m256i G = _mm256_loadu_si256((const __m256i *)(pb + 32 + 32 * u));
			__m256i m[4];
			#pragma GCC unroll 4
			for (int e = 0; e < 4; e++) {
				const __m256i byte = _mm256_and_si256(_mm256_srli_epi32(G, 8 * e), _mm256_set1_epi32(0xff));
				scf[4 * u + e] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(byte, _mm256_set1_epi32(15))));
				m[e] = _mm256_srli_epi32(byte, 4);
			}
			mp[2 * u] = _mm256_or_si256(m[0], _mm256_slli_epi32(m[1], 16));
			mp[2 * u + 1] = _mm256_or_si256(m[2], _mm256_slli_epi32(m[3], 16));
		}
		float dy[P2K_NT];
		__m256 t[P2K_NT];
		p2k_rows(NT, y, arb, dy, t);
		#pragma GCC unroll 1
		for (int c = 0; c < 2; c++)
			#pragma GCC unroll 1
			for (int k = 0; k < 4; k++) // values 128c+32k+l
				P2K_SUB16(NT, t,
				          _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(pb + 160 + 256 * c + 32 * v)), 2 * k), m3),
				          scf[8 * c + 2 * k], scf[8 * c + 2 * k + 1], y + 4 + 128 * c + 32 * k, arb);
		p2k_rows_add(NT, acc, t, dy);
		p2k_offsets(NT, acc, mp, dmin, dy, y, arb);
	}
	p2k_finish(NT, acc, rows, out, ldo);
}

// p2k_q3_scale is packed_k.c's q3k_scale16 at this width.
DT_INLINE __m256i p2k_q3_scale(int j, __m256i A, __m256i B, __m256i C) {
	const int byte = j % 8, shift = 8 * (byte % 4) + (j < 8 ? 0 : 4);
	const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(byte < 4 ? A : B, shift), _mm256_set1_epi32(15));
	const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(C, 8 * (j % 4) + 2 * (j / 4)), _mm256_set1_epi32(3));
	return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
}

// p2k3_tile is Q3_K's: the values as unsigned q+4 (0..7), the 4 taken off
// through the activations' 16-value sums times the scales. Layout (8
// rows): d[8] f16; scale bytes 0..3, 4..7, 8..11; hmask transposed (8
// vectors); qs transposed (2 × 8 vectors).
DT_INLINE void p2k3_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, int64_t arb,
                         float *out, int64_t ldo) {
	const int psize = P2K_ROWS * Q3_K_SIZE;
	const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
	__m256 acc[P2K_NT];
	p2k_zero(NT, acc);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * psize, *y = act + b * Q8_K_SIZE;
		const __m256 d = p2k_fetch(pb, psize);
		const __m256i A = _mm256_loadu_si256((const __m256i *)(pb + 16)), B = _mm256_loadu_si256((const __m256i *)(pb + 48)),
		              C = _mm256_loadu_si256((const __m256i *)(pb + 80));
		__m256 scf[16];
		__m256i cp[8];
		#pragma GCC unroll 8
		for (int u = 0; u < 8; u++) {
			const __m256i s0 = p2k_q3_scale(2 * u, A, B, C), s1 = p2k_q3_scale(2 * u + 1, A, B, C);
			scf[2 * u] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s0));
			scf[2 * u + 1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s1));
			cp[u] = _mm256_or_si256(_mm256_and_si256(s0, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s1, 16));
		}
		float dy[P2K_NT];
		__m256 t[P2K_NT];
		p2k_rows(NT, y, arb, dy, t);
		#pragma GCC unroll 1
		for (int c = 0; c < 2; c++)
			#pragma GCC unroll 1
			for (int k = 0; k < 4; k++) { // values 128c+32k+l
				const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * c + k)));
				P2K_SUB16(NT, t,
				          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(pb + 368 + 256 * c + 32 * v)), 2 * k), m3),
				                          _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(pb + 112 + 32 * v)), bit), bit), four)),
				          scf[8 * c + 2 * k], scf[8 * c + 2 * k + 1], y + 4 + 128 * c + 32 * k, arb);
			}
		p2k_rows_add(NT, acc, t, dy);
		p2k_offsets(NT, acc, cp, _mm256_mul_ps(d, _mm256_set1_ps(4)), dy, y, arb);
	}
	p2k_finish(NT, acc, rows, out, ldo);
}

// p2k_iq4_tile is IQ4_XS's. Its values plus 128 (1..241) would
// overflow vpmaddubsw's pairs, so it multiplies the signed values by ggml's
// sign trick and adds 128 times the activations' sums (with AVX-VNNI,
// whose vpdpbusd sums in 32 bits, the unsigned values directly): the
// integer the AVX-512 tile's unsigned values give, whose offset the float
// steps then
// take off as there. Layout (8 rows): d[8] f16, scales_h[8] u16, scales_l
// (one vector), qs transposed (4 × 8 vectors).
DT_INLINE void p2k_iq4_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, int64_t arb,
                               float *out, int64_t ldo) {
#if defined(DT_AVXVNNI)
	const __m128i values = iq4_lut_u();
#else
	const __m128i values = iq4_lut();
#endif
	const int psize = P2K_ROWS * IQ4_XS_SIZE;
	const __m256i table = _mm256_broadcastsi128_si256(values), m4 = _mm256_set1_epi8(0x0f);
	__m256 acc[P2K_NT];
	p2k_zero(NT, acc);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * psize, *y = act + b * Q8_K_SIZE;
		const __m256 d = p2k_fetch(pb, psize);
		const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(pb + 16)));
		const __m256i L = _mm256_loadu_si256((const __m256i *)(pb + 32));
		__m256 scf[8];
		__m256i cp[8];
		#pragma GCC unroll 8
		for (int s = 0; s < 8; s++) {
			const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(L, 4 * s), _mm256_set1_epi32(15));
			const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(sh, 2 * s), _mm256_set1_epi32(3));
			const __m256i sc = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
			scf[s] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
			cp[s] = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(sc, 16));
		}
		float dy[P2K_NT];
		__m256 t[P2K_NT];
		p2k_rows(NT, y, arb, dy, t);
		#pragma GCC unroll 1
		for (int s = 0; s < 8; s++) { // sub-block s: chunk s/2's bytes 16(s%2)..
			__m256i S[P2K_NT];
			#pragma GCC unroll 4
			for (int j = 0; j < NT; j++) {
#if defined(DT_AVXVNNI)
				S[j] = _mm256_setzero_si256();
#else
				// 128 × the sub-block's two 16-value sums of activations.
				const int32_t sums = (int16_t)ld16(y + j * arb + 260 + 4 * s) + (int16_t)ld16(y + j * arb + 262 + 4 * s);
				S[j] = _mm256_set1_epi32(128 * sums);
#endif
			}
			#pragma GCC unroll 4
			for (int g = 0; g < 4; g++) {
				const __m256i q = _mm256_loadu_si256((const __m256i *)(pb + 64 + 32 * (8 * (s / 2) + 4 * (s % 2) + g)));
				const __m256i wl = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
				const __m256i wh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
#if defined(DT_AVXVNNI)
				#pragma GCC unroll 4
				for (int j = 0; j < NT; j++) {
					const uint8_t *x = y + j * arb + 4 + 32 * s;
					S[j] = p2_sum16(S[j], wl, x + 4 * g);
					S[j] = p2_sum16(S[j], wh, x + 16 + 4 * g);
				}
#else
				const __m256i al = _mm256_abs_epi8(wl), ah = _mm256_abs_epi8(wh);
				#pragma GCC unroll 4
				for (int j = 0; j < NT; j++) {
					const uint8_t *x = y + j * arb + 4 + 32 * s;
					S[j] = p2_dot_signed(S[j], al, _mm256_sign_epi8(_mm256_set1_epi32(ld32(x + 4 * g)), wl));
					S[j] = p2_dot_signed(S[j], ah, _mm256_sign_epi8(_mm256_set1_epi32(ld32(x + 16 + 4 * g)), wh));
				}
#endif
			}
			#pragma GCC unroll 4
			for (int j = 0; j < NT; j++) t[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[j]), scf[s], t[j]);
		}
		p2k_rows_add(NT, acc, t, dy);
		p2k_offsets(NT, acc, cp, _mm256_mul_ps(d, _mm256_set1_ps(128)), dy, y, arb);
	}
	p2k_finish(NT, acc, rows, out, ldo);
}

typedef void (*p2k_fn)(const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, int64_t arb, float *out, int64_t ldo);

#define P2K_FN(name, call, NT)                                                                                    \
	static void name##_##NT(const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, int64_t arb, float *out, \
	                        int64_t ldo) {                                                                       \
		call;                                                                                                      \
	}
#define P2K_FNS(name, call)                                                                                      \
	P2K_FN(name, call(1), 1) P2K_FN(name, call(2), 2) P2K_FN(name, call(3), 3) P2K_FN(name, call(4), 4)           \
	static p2k_fn const name##s[P2K_NT + 1] = {0, name##_1, name##_2, name##_3, name##_4};
#define P2K_Q4(NT) p2k45_tile(NT, 0, pg, rows, nb, act, arb, out, ldo)
#define P2K_Q5(NT) p2k45_tile(NT, 1, pg, rows, nb, act, arb, out, ldo)
#define P2K_Q6(NT) p2k6_tile(NT, pg, rows, nb, act, arb, out, ldo)
#define P2K_Q2(NT) p2k2_tile(NT, pg, rows, nb, act, arb, out, ldo)
#define P2K_Q3(NT) p2k3_tile(NT, pg, rows, nb, act, arb, out, ldo)
#define P2K_IQ4(NT) p2k_iq4_tile(NT, pg, rows, nb, act, arb, out, ldo)
P2K_FNS(p2k_q4_k_tile, P2K_Q4)
P2K_FNS(p2k_q5_k_tile, P2K_Q5)
P2K_FNS(p2k_q6_k_tile, P2K_Q6)
P2K_FNS(p2k_q2_k_tile, P2K_Q2)
P2K_FNS(p2k_q3_k_tile, P2K_Q3)
P2K_FNS(p2k_iq4_xs_tile, P2K_IQ4)

#endif
#endif
