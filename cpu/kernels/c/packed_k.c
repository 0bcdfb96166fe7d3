// Packed Q2_K to Q6_K and IQ4_XS weights: packed.c's scheme for the
// 256-value super-blocks. Rows
// go in groups of 16 (the last padded with zero rows), each group's
// super-blocks one after another, each super-block already in the lanes
// the AVX-512 tile reads (lane i = row i):
//
//	d[16] f16, dmin[16] f16                          64 bytes
//	scale bytes 0..3, 4..7, 8..11 of each row      3 × 64 bytes
//	Q5_K only: qh transposed (8 vectors)             512 bytes
//	qs transposed: chunk k (32 bytes of a row),
//	  vector g = bytes 4g..4g+3 of it              32 × 64 bytes
//
// 2304 bytes for Q4_K and 2816 for Q5_K. Q6_K's super-block:
//
//	d[16] f16                                        32 bytes
//	scales: vector u = scale bytes 4u..4u+3        4 × 64 bytes
//	qh transposed, halves h = 0, 1 (bytes 128+32h)  16 × 64 bytes
//	ql transposed, h and its two 32-byte parts      32 × 64 bytes
//
// 3360 bytes. Q3_K's: d[16] f16 (32 bytes), scale bytes 0..3, 4..7, 8..11
// (3 vectors), hmask transposed (8 vectors), qs transposed (two 32-byte
// chunks, 16 vectors): 1760 bytes. Q2_K's: d[16], dmin[16], scale bytes
// (4 vectors), qs as Q3_K's: 1344 bytes. IQ4_XS's: d[16] f16 (32 bytes), scales_h[16] (32 bytes),
// scales_l (one vector), qs transposed as Q4_K's: 2176 bytes. Each is 16
// rows' worth of the file, no more. The product then streams one run of memory and does neither the
// gathers nor the transposes of kquants.c's tiles.
//
// Unlike those tiles, every activation row takes the same float steps
// whatever the number of rows beside it (per sub-block one fma of its
// product and scale into the row's super-block sum, per super-block one
// of that sum and the row's scale), so a tree's verification scores each
// node bit for bit as decoding it alone does.
#include "kquants.h"
#include "packed_k_avx2.h"

// KROWS is the level's row group: 16 at AVX-512, 8 at AVX2, where they
// pack too (packed_k_avx2.h).
#if defined(DT_AVX512)
#define KROWS 16
#else
#define KROWS 8
#endif
#define PK_ROWS 16
#define PK_Q4_K (16 * Q4_K_SIZE)
#define PK_Q5_K (16 * Q5_K_SIZE)
#define PK_Q6_K (16 * Q6_K_SIZE)
#define PK_IQ4_XS (16 * IQ4_XS_SIZE)
#define PK_Q3_K (16 * Q3_K_SIZE)
#define PK_Q2_K (16 * Q2_K_SIZE)
#define PKK_AHEAD 8192 // bytes of the packed stream prefetched ahead, as packed.c
// PKK_ROW is a laid-out activation row's super-block: its Q8_K block and
// the eight sums of its 32-value sub-blocks (int16, pkk_layout), with which
// the 32-value types take their offsets in half the products
// (pk_offsets32). KS(NT) is the stride of the rows a tile of NT reads: a
// row alone is read as it is, a Q8_K row.
#define PKK_ROW (Q8_K_SIZE + 16)
#define KS(NT) ((NT) == 1 ? Q8_K_SIZE : PKK_ROW)

#if defined(DT_AVX512)

// A super-block's sub-blocks are summed per activation row in t, each product
// times its sub-block's scale, and t times the row's scale dy then added into
// the row's accumulator (pk_rows_add): one multiply per row and super-block
// rather than one per sub-block, which with 16 rows beside each other bound
// the tiles (docs/measurements/kernels-products.md, "Scales once a
// super-block").

// pk_chains adds one sub-block's products, times its scale per row (lane)
// scf, into the sums t of n rows side by side (n ≤ 8): W its V weight
// vectors (4V values) in dot8's order, x the first row's quants (the rows
// xs bytes apart, as pkk_layout lays them out). The rows' chains of
// V vpdpbusd go interleaved, so that the core always has independent ones
// at hand (one row's chain after another's left it waiting on their
// latency).
DT_INLINE void pk_chains(const int n, const int V, __m512 *t, const __m512i *W, __m512 scf, const uint8_t *x,
                         const int xs) {
	__m512i S[8];
	#pragma GCC unroll 8
	for (int r = 0; r < n; r++) S[r] = _mm512_setzero_si512();
	#pragma GCC unroll 8
	for (int g = 0; g < V; g++)
		#pragma GCC unroll 8
		for (int r = 0; r < n; r++) S[r] = dpbusd_bc(S[r], W[g], x + r * xs + 4 * g);
	#pragma GCC unroll 8
	for (int r = 0; r < n; r++) t[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), scf, t[r]);
}

// pk_sub adds one 32-value sub-block's products into the NT rows' sums t:
// W its 16 rows' weights in dot8's order, scf its scale per row (lane), x
// the first activation row's 32 quants (the rows KS(NT) bytes apart, as
// pkk_layout lays them out): eight rows at a time in pk_chains; fewer than
// four rows take dot8's four chains each.
DT_INLINE void pk_sub(const int NT, __m512 t[16], const __m512i W[8], __m512 scf, const uint8_t *x) {
	if (NT < 4) {
		#pragma GCC unroll 4
		for (int j = 0; j < NT; j++) {
			const __m512i S = dot8(_mm512_setzero_si512(), W, x + j * KS(NT));
			t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), scf, t[j]);
		}
		return;
	}
	#pragma GCC unroll 2
	for (int j0 = 0; j0 < NT; j0 += 8) pk_chains(NT - j0 < 8 ? NT - j0 : 8, 8, t + j0, W, scf, x + j0 * KS(NT), KS(NT));
}

// pk_rows_zero clears the NT rows' sums.
DT_INLINE void pk_rows_zero(const int NT, __m512 *t) {
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) t[j] = _mm512_setzero_ps();
}

// pk_rows_add adds the NT rows' sums t, times their scales dy, into acc.
DT_INLINE void pk_rows_add(const int NT, __m512 *acc, const __m512 *t, const float *dy) {
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_fmadd_ps(t[j], _mm512_set1_ps(dy[j]), acc[j]);
}

// PK_PASSES adds a super-block's products, times the activation rows' scales
// dy, into the NT rows' accumulators acc: subs(n, t, x, ...) sums them for n
// rows into t (x the first row's laid-out super-block, the rows KS(n) bytes
// apart). With split, sixteen rows go in two passes of eight, the weights
// unpacked again for the second: sixteen rows' sums beside the accumulators,
// the weights and their products outgrew the 32 vector registers, and for the
// 4-bit types the spills cost more than unpacking twice; Q6_K's, Q3_K's and
// Q2_K's unpacking costs more than the spills
// (docs/measurements/kernels-products.md, "Eight rows a pass"). Each row's
// float steps are the same either way.
#define PK_PASSES(NT, split, acc, dy, x, subs, ...)                                                           \
	do {                                                                                                       \
		if ((split) && (NT) == 16) {                                                                           \
			_Pragma("GCC unroll 1") for (int j0_ = 0; j0_ < 16; j0_ += 8) {                                     \
				__m512 t_[8];                                                                                  \
				pk_rows_zero(8, t_);                                                                           \
				subs(8, t_, (x) + j0_ * PKK_ROW, __VA_ARGS__);                                                 \
				pk_rows_add(8, (acc) + j0_, t_, (dy) + j0_);                                                   \
			}                                                                                                  \
		} else {                                                                                               \
			__m512 t_[16];                                                                                     \
			pk_rows_zero(NT, t_);                                                                              \
			subs(NT, t_, (x), __VA_ARGS__);                                                                    \
			pk_rows_add(NT, acc, t_, dy);                                                                      \
		}                                                                                                      \
	} while (0)

// pk_pairs takes a super-block's offsets off the NT rows' accumulators:
// per row (lane) the U pairs of 16-bit factors in cp (mins, or scales
// times an offset) against the pairs of activation sums at byte `at` of
// each row's super-block, times f (dmin, or d times the offset) and the
// activation row's scale.
DT_INLINE void pk_pairs(const int NT, const int U, __m512 acc[16], const __m512i *cp, __m512 f, const float dy[16],
                        const uint8_t *x, const int at) {
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) {
		const uint8_t *y = x + j * KS(NT) + at;
		__m512i ci = _mm512_setzero_si512();
		#pragma GCC unroll 8
		for (int u = 0; u < U; u++) ci = _mm512_dpwssd_epi32(ci, cp[u], _mm512_set1_epi32(ld32(y + 4 * u)));
		acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ci), _mm512_mul_ps(f, _mm512_set1_ps(dy[j])), acc[j]);
	}
}

// pk_offsets is pk_pairs against the rows' 16-value sums (the Q8_K
// block's): cp one pair per two 16-value groups.
DT_INLINE void pk_offsets(const int NT, __m512 acc[16], const __m512i cp[8], __m512 f, const float dy[16],
                          const uint8_t *x) {
	pk_pairs(NT, 8, acc, cp, f, dy, x, 260);
}

// pk_offsets32 is pk_offsets for the 32-value types (c as pk_offsets
// takes it, a sub-block's factor in both halves of its pairs): from the
// laid-out rows' 32-value sums, pairing the factors of sub-blocks 2u and
// 2u+1, four products a row rather than eight; the integers are the same.
// A row alone, read as it is, takes pk_offsets.
DT_INLINE void pk_offsets32(const int NT, __m512 acc[16], const __m512i c[8], __m512 f, const float dy[16],
                            const uint8_t *x) {
	if (NT == 1) {
		pk_offsets(NT, acc, c, f, dy, x);
		return;
	}
	__m512i c2[4];
	#pragma GCC unroll 4
	for (int u = 0; u < 4; u++)
		c2[u] = _mm512_or_si512(_mm512_and_si512(c[2 * u], _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(c[2 * u + 1], 16));
	pk_pairs(NT, 4, acc, c2, f, dy, x, Q8_K_SIZE);
}

// pk_sub16 is pk_sub for 32 values in two 16-value groups, each with a
// scale of its own (Q2_K, Q3_K): W[0..3] the first group, W[4..7] the
// second.
DT_INLINE void pk_sub16(const int NT, __m512 t[16], const __m512i W[8], __m512 sc0, __m512 sc1, const uint8_t *x) {
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) {
		const uint8_t *xj = x + j * KS(NT);
		__m512i S0 = _mm512_setzero_si512(), S1 = _mm512_setzero_si512();
		#pragma GCC unroll 4
		for (int v = 0; v < 4; v++) {
			S0 = dpbusd_bc(S0, W[v], xj + 4 * v);
			S1 = dpbusd_bc(S1, W[4 + v], xj + 16 + 4 * v);
		}
		t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S0), sc0, t[j]);
		t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S1), sc1, t[j]);
	}
}

// q23_subs sums a packed Q2_K (Q3 = 0) or Q3_K super-block's sixteen
// 16-value groups for n activation rows (see PK_PASSES): Q2_K's values
// their two bits, Q3_K's those plus 4 where hmask's bit is set (as
// pq3_k_tile takes them).
DT_INLINE void q23_subs(const int n, __m512 *t, const uint8_t *x, const int Q3, const uint8_t *pb, const __m512 *scf) {
	const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
	const uint8_t *qs = pb + (Q3 ? 736 : 320);
	#pragma GCC unroll 1
	for (int c = 0; c < 2; c++) {
		#pragma GCC unroll 1
		for (int k = 0; k < 4; k++) { // values 128c+32k+l
			__m512i W[8];
			#pragma GCC unroll 8
			for (int v = 0; v < 8; v++) {
				W[v] = _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(qs + 512 * c + 64 * v), 2 * k), m3);
				if (Q3) {
					const __mmask64 h = _mm512_test_epi8_mask(_mm512_loadu_si512(pb + 224 + 64 * v),
					                                          _mm512_set1_epi8((char)(1 << (4 * c + k))));
					W[v] = _mm512_or_si512(W[v], _mm512_maskz_mov_epi8(h, four));
				}
			}
			const int sb = 8 * c + 2 * k; // its two 16-value groups: sb, sb+1
			pk_sub16(n, t, W, scf[sb], scf[sb + 1], x + 4 + 128 * c + 32 * k);
		}
	}
}

// pq2_k_tile: Q2_K's 2-bit values times each 16 values' 4-bit scale, the
// mins (the scale bytes' high nibbles) through the activations' 16-value
// sums.
DT_INLINE void pq2_k_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out,
                          int64_t ldo) {
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * PK_Q2_K;
		for (int k = 0; k < PK_Q2_K; k += 64) _mm_prefetch((const char *)pb + PKK_AHEAD + k, _MM_HINT_T0);
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
		const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32)));
		__m512 scf[16];
		__m512i mp[8];
		#pragma GCC unroll 4
		for (int u = 0; u < 4; u++) {
			const __m512i G = _mm512_loadu_si512(pb + 64 + 64 * u);
			__m512i m[4];
			#pragma GCC unroll 4
			for (int e = 0; e < 4; e++) {
				const __m512i byte = _mm512_and_si512(_mm512_srli_epi32(G, 8 * e), _mm512_set1_epi32(0xff));
				scf[4 * u + e] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(byte, _mm512_set1_epi32(15))));
				m[e] = _mm512_srli_epi32(byte, 4);
			}
			mp[2 * u] = _mm512_or_si512(m[0], _mm512_slli_epi32(m[1], 16));
			mp[2 * u + 1] = _mm512_or_si512(m[2], _mm512_slli_epi32(m[3], 16));
		}
		float dy[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) dy[j] = ldf(act + (b * NT + j) * KS(NT));
		PK_PASSES(NT, 0, acc, dy, act + b * NT * KS(NT), q23_subs, 0, pb, scf);
		pk_offsets(NT, acc, mp, dmin, dy, act + b * NT * KS(NT));
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

// q3k_scale16 is the scale of 16-value group j (0..15), less 32, for every
// row from its scale bytes 0..3 (A), 4..7 (B) and 8..11 (C): the low
// nibble of byte j (j < 8) or the high one of byte j-8, and two bits of
// byte 8+j%4 above them.
DT_INLINE __m512i q3k_scale16(int j, __m512i A, __m512i B, __m512i C) {
	const int byte = j % 8, shift = 8 * (byte % 4) + (j < 8 ? 0 : 4);
	const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(byte < 4 ? A : B, shift), _mm512_set1_epi32(15));
	const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(C, 8 * (j % 4) + 2 * (j / 4)), _mm512_set1_epi32(3));
	return _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
}

// pq3_k_tile: the values as unsigned q+4 (0..7: two bits from qs, 4 where
// hmask's bit is set), the 4 taken off through the activations' 16-value
// sums times the scales; 16 scales, so two dot products of 4 vectors per
// 32 values.
DT_INLINE void pq3_k_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out,
                          int64_t ldo) {
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * PK_Q3_K;
		for (int k = 0; k < PK_Q3_K; k += 64) _mm_prefetch((const char *)pb + PKK_AHEAD + k, _MM_HINT_T0);
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
		const __m512i A = _mm512_loadu_si512(pb + 32), B = _mm512_loadu_si512(pb + 96), C = _mm512_loadu_si512(pb + 160);
		__m512 scf[16];
		__m512i cp[8];
		#pragma GCC unroll 8
		for (int u = 0; u < 8; u++) {
			const __m512i s0 = q3k_scale16(2 * u, A, B, C), s1 = q3k_scale16(2 * u + 1, A, B, C);
			scf[2 * u] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(s0));
			scf[2 * u + 1] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(s1));
			cp[u] = _mm512_or_si512(_mm512_and_si512(s0, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(s1, 16));
		}
		float dy[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) dy[j] = ldf(act + (b * NT + j) * KS(NT));
		PK_PASSES(NT, 0, acc, dy, act + b * NT * KS(NT), q23_subs, 1, pb, scf);
		const __m512 d4 = _mm512_mul_ps(d, _mm512_set1_ps(4));
		pk_offsets(NT, acc, cp, d4, dy, act + b * NT * KS(NT));
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

// iq4_xs_subs sums a packed IQ4_XS super-block's eight sub-blocks for n
// activation rows (see PK_PASSES).
DT_INLINE void iq4_xs_subs(const int n, __m512 *t, const uint8_t *x, const uint8_t *pb, __m512i table,
                           const __m512 *scf) {
	#pragma GCC unroll 1
	for (int k = 0; k < 4; k++) {
		#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			// Only this sub-block's four vectors are loaded: with 16
			// accumulators live, holding the chunk's eight spilled.
			const int s = 2 * k + h;
			__m512i T[8], W[8];
			#pragma GCC unroll 4
			for (int v = 0; v < 4; v++) T[4 * h + v] = _mm512_loadu_si512(pb + 128 + 64 * (8 * k + 4 * h + v));
			iq4_xs_weights(T, h, table, W);
			pk_sub(n, t, W, scf[s], x + 4 + 32 * s);
		}
	}
}

// piq4_xs_tile is pk45_tile for IQ4_XS (see kquants.c's iq4_xs_tile).
DT_INLINE void piq4_xs_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out,
                            int64_t ldo) {
	const __m512i table = iq4_table();
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * PK_IQ4_XS;
		for (int k = 0; k < PK_IQ4_XS; k += 64) _mm_prefetch((const char *)pb + PKK_AHEAD + k, _MM_HINT_T0);
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
		const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(pb + 32)));
		const __m512i L = _mm512_loadu_si512(pb + 64);
		__m512 scf[8];
		__m512i cp[8];
		#pragma GCC unroll 8
		for (int s = 0; s < 8; s++) {
			const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(L, 4 * s), _mm512_set1_epi32(15));
			const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * s), _mm512_set1_epi32(3));
			const __m512i sc = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
			scf[s] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
			cp[s] = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(sc, 16));
		}
		float dy[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) dy[j] = ldf(act + (b * NT + j) * KS(NT));
		PK_PASSES(NT, 1, acc, dy, act + b * NT * KS(NT), iq4_xs_subs, pb, table, scf);
		const __m512 d128 = _mm512_mul_ps(d, _mm512_set1_ps(128));
		pk_offsets32(NT, acc, cp, d128, dy, act + b * NT * KS(NT));
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

// q6_scale_int is the scale of sub-block i (0..15) of a packed Q6_K
// super-block pb for each row (lane), and q6_scale it times the rows' d.
// They are read where they are used rather than held: with the rows' sums
// and chains live, sixteen held scales were spilled and reloaded.
DT_INLINE __m512i q6_scale_int(const uint8_t *pb, int i) {
	const __m512i G = _mm512_loadu_si512(pb + 32 + 64 * (i / 4));
	return _mm512_srai_epi32(_mm512_sll_epi32(G, _mm_cvtsi32_si128(24 - 8 * (i % 4))), 24);
}
DT_INLINE __m512 q6_scale(const uint8_t *pb, int i) {
	const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
	return _mm512_mul_ps(d, _mm512_cvtepi32_ps(q6_scale_int(pb, i)));
}

// q6_order is the order in which the tiles sum a Q6_K super-block's
// sub-blocks (the order of its packed quarters; AVX2's tiles sum alike).
static const uint8_t q6_order[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};

// q6_sub adds sub-block i (0..15) of the packed Q6_K super-block pb,
// scaled, into the one row's sum t (x: its quants): a decode step's, in
// two chains (their latency would show in one), unrolled over the
// super-block. The integer, and so the float step, is q6_pair's.
DT_INLINE void q6_sub(__m512 t[1], const uint8_t *pb, int i, const uint8_t *x) {
	const int h = i / 8, qi = i % 8 / 2, e = i % 2;
	const uint8_t *ql = pb + 1312 + 512 * (2 * h + qi % 2) + 256 * e, *qh = pb + 288 + 512 * h + 256 * e;
	__m512i W[4];
	#pragma GCC unroll 4
	for (int v = 0; v < 4; v++) W[v] = q6_quant(qi, _mm512_loadu_si512(ql + 64 * v), _mm512_loadu_si512(qh + 64 * v));
	x += 128 * h + 32 * qi + 16 * e;
	__m512i S = _mm512_setzero_si512(), S1 = _mm512_setzero_si512();
	S = _mm512_dpbusd_epi32(S, W[0], _mm512_set1_epi32(ld32(x)));
	S1 = _mm512_dpbusd_epi32(S1, W[1], _mm512_set1_epi32(ld32(x + 4)));
	S = _mm512_dpbusd_epi32(S, W[2], _mm512_set1_epi32(ld32(x + 8)));
	S1 = _mm512_dpbusd_epi32(S1, W[3], _mm512_set1_epi32(ld32(x + 12)));
	t[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(S, S1)), q6_scale(pb, i), t[0]);
}

// q6_pair adds sub-blocks i and i+1 (i even: the two halves of one
// quarter's 32 values, e = 0 and 1) as pk_sub16 takes them.
DT_INLINE void q6_pair(const int NT, __m512 t[16], const uint8_t *pb, int i, const uint8_t *x) {
	const int h = i / 8, qi = i % 8 / 2;
	const uint8_t *ql = pb + 1312 + 512 * (2 * h + qi % 2), *qh = pb + 288 + 512 * h;
	__m512i W[8];
	#pragma GCC unroll 8
	for (int v = 0; v < 8; v++) W[v] = q6_quant(qi, _mm512_loadu_si512(ql + 64 * v), _mm512_loadu_si512(qh + 64 * v));
	pk_sub16(NT, t, W, q6_scale(pb, i), q6_scale(pb, i + 1), x + 128 * h + 32 * qi);
}

// q6_subs sums a packed Q6_K super-block's sixteen sub-blocks for n
// activation rows (see PK_PASSES).
DT_INLINE void q6_subs(const int n, __m512 *t, const uint8_t *x, const uint8_t *pb) {
	x += 4;
	if (n == 1) {
		#pragma GCC unroll 16
		for (int k = 0; k < 16; k++) q6_sub(t, pb, q6_order[k], x);
	} else if (n >= 4) {
		// One quarter's two sub-blocks an iteration: unrolled, the
		// super-block's code outgrew the core's op cache
		// (docs/measurements/kernels-products.md, "The k-quant tiles
		// in the op cache").
		#pragma GCC unroll 1
		for (int k = 0; k < 16; k += 2) q6_pair(n, t, pb, q6_order[k], x);
	} else {
		#pragma GCC unroll 8
		for (int k = 0; k < 16; k += 2) q6_pair(n, t, pb, q6_order[k], x);
	}
}

// pq6_k_tile is pk45_tile for Q6_K: per 16-value sub-block a product of
// the unsigned 6-bit quants, scaled, and the 32 they are offset by taken
// off through the activations' sums times the scales.
DT_INLINE void pq6_k_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out,
                          int64_t ldo) {
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * PK_Q6_K;
		for (int k = 0; k < PK_Q6_K; k += 64) _mm_prefetch((const char *)pb + PKK_AHEAD + k, _MM_HINT_T0);
		float dy[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) dy[j] = ldf(act + (b * NT + j) * KS(NT));
		PK_PASSES(NT, 0, acc, dy, act + b * NT * KS(NT), q6_subs, pb);
		__m512i cp[8];
		#pragma GCC unroll 8
		for (int u = 0; u < 8; u++)
			cp[u] = _mm512_or_si512(_mm512_and_si512(q6_scale_int(pb, 2 * u), _mm512_set1_epi32(0xffff)),
			                        _mm512_slli_epi32(q6_scale_int(pb, 2 * u + 1), 16));
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
		const __m512 d32 = _mm512_mul_ps(d, _mm512_set1_ps(32));
		pk_offsets(NT, acc, cp, d32, dy, act + b * NT * KS(NT));
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

// pk45_subs sums a Q4_K or Q5_K super-block's eight sub-blocks for n
// activation rows (see PK_PASSES): per sub-block its 16 weight rows
// unpacked, then pk_sub's products.
DT_INLINE void pk45_subs(const int n, __m512 *t, const uint8_t *x, const int Q5, const uint8_t *qs, const uint8_t *qh,
                         const __m512 *scf) {
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	#pragma GCC unroll 1
	for (int k = 0; k < 4; k++) {
		#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) { // sub-block 2k+h: low nibbles, then high
			__m512i W[8];
			#pragma GCC unroll 8
			for (int v = 0; v < 8; v++) {
				const __m512i q = _mm512_loadu_si512(qs + 64 * (8 * k + v));
				W[v] = _mm512_and_si512(h ? _mm512_srli_epi16(q, 4) : q, m4);
				if (Q5) W[v] = _mm512_or_si512(W[v], q5_high(_mm512_loadu_si512(qh + 64 * v), 2 * k + h));
			}
			const int s = 2 * k + h;
			pk_sub(n, t, W, scf[s], x + 4 + 32 * s);
		}
	}
}

// pk45_tile multiplies one packed group (pg) by NT activation rows over nb
// super-blocks.
DT_INLINE void pk45_tile(const int NT, const int Q5, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act,
                         float *out, int64_t ldo) {
	const int psize = Q5 ? PK_Q5_K : PK_Q4_K;
	__m512 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *pb = pg + b * psize;
		for (int k = 0; k < psize; k += 64) _mm_prefetch((const char *)pb + PKK_AHEAD + k, _MM_HINT_T0);
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));
		const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + 32)));
		const __m512i A = _mm512_loadu_si512(pb + 64), B = _mm512_loadu_si512(pb + 128), C = _mm512_loadu_si512(pb + 192);
		const uint8_t *qh = pb + 256, *qs = pb + 256 + (Q5 ? 512 : 0);
		__m512 scf[8];
		__m512i mp[8];
		#pragma GCC unroll 8
		for (int s = 0; s < 8; s++) {
			__m512i sc, m;
			q4k_scales(s, A, B, C, &sc, &m);
			scf[s] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
			mp[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
		}
		float dy[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) dy[j] = ldf(act + (b * NT + j) * KS(NT));
		PK_PASSES(NT, 1, acc, dy, act + b * NT * KS(NT), pk45_subs, Q5, qs, qh, scf);
		pk_offsets32(NT, acc, mp, dmin, dy, act + b * NT * KS(NT));
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

// The tiles read their NT activation rows laid out by pkk_layout: row j's
// super-block b at act + (b*NT + j)*PKK_ROW (one row: the row as it is, b at
// act + b*Q8_K_SIZE), so that every address a super-block takes is a constant
// offset from one pointer (as packed.c's tiles,
// docs/measurements/kernels-products.md, "The tiles' activations laid out").
typedef void (*pk45_fn)(const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out, int64_t ldo);
#define PK45_FN(name, NT)                                                                                      \
	static void name##_##NT(const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out, int64_t ldo) { \
		name(NT, pg, rows, nb, act, out, ldo);                                                                  \
	}
DT_INLINE void pq4_k_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out,
                          int64_t ldo) {
	pk45_tile(NT, 0, pg, rows, nb, act, out, ldo);
}
DT_INLINE void pq5_k_tile(const int NT, const uint8_t *pg, int rows, int64_t nb, const uint8_t *act, float *out,
                          int64_t ldo) {
	pk45_tile(NT, 1, pg, rows, nb, act, out, ldo);
}
NT_VARIANTS(PK45_FN, pk45_fn, pq4_k_tile, pq4_k_tiles)
NT_VARIANTS(PK45_FN, pk45_fn, pq5_k_tile, pq5_k_tiles)
NT_VARIANTS(PK45_FN, pk45_fn, pq6_k_tile, pq6_k_tiles)
NT_VARIANTS(PK45_FN, pk45_fn, piq4_xs_tile, piq4_xs_tiles)
NT_VARIANTS(PK45_FN, pk45_fn, pq3_k_tile, pq3_k_tiles)
NT_VARIANTS(PK45_FN, pk45_fn, pq2_k_tile, pq2_k_tiles)

// pkk_layout copies n activation rows (arb bytes apart, nb super-blocks)
// into a buffer of the thread's, grown as needed, tile by tile of 16 rows
// as the tiles read them, each super-block PKK_ROW bytes with its 32-value
// sums after it; 0 if it cannot be had.
static const uint8_t *pkk_layout(const uint8_t *act, int64_t arb, int64_t n, int64_t nb) {
	static __thread uint8_t *buf;
	static __thread int64_t cap;
	const int64_t size = n * nb * PKK_ROW;
	if (size > cap) {
		uint8_t *b = aligned_alloc(64, (size_t)(size + 63) / 64 * 64);
		if (!b) return 0;
		free(buf);
		buf = b, cap = size;
	}
	for (int64_t j0 = 0; j0 < n; j0 += 16) {
		const int64_t nt = n - j0 < 16 ? n - j0 : 16;
		for (int64_t b = 0; b < nb; b++)
			for (int64_t j = 0; j < nt; j++) {
				uint8_t *d = buf + (j0 * nb + b * nt + j) * PKK_ROW;
				memcpy(d, act + (j0 + j) * arb + b * Q8_K_SIZE, Q8_K_SIZE);
				for (int s = 0; s < 8; s++) {
					int16_t lo, hi, sum;
					memcpy(&lo, d + 260 + 4 * s, 2);
					memcpy(&hi, d + 262 + 4 * s, 2);
					sum = (int16_t)(lo + hi);
					memcpy(d + Q8_K_SIZE + 2 * s, &sum, 2);
				}
			}
	}
	return buf;
}

// pk45_matmul runs the groups holding rows [lo, hi) against n activation
// rows, 16 at a time. (Each call lays the rows out again: the C pool's
// pieces of one product each do, a copy of the activations, small beside
// the product's reading of its weights.)
static void pk45_matmul(pk45_fn const tiles[17], int psize, float *out, int64_t ldo, const uint8_t *pw, int64_t rows,
                        int64_t lo, int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	const int64_t nb = cols / QKK;
	const uint8_t *x = n > 1 ? pkk_layout(act, arb, n, nb) : act;
	if (!x) {
		// No memory for the layout: each row alone (a row is laid out as
		// it is), which takes the same float steps.
		for (int64_t j = 0; j < n; j++) pk45_matmul(tiles, psize, out + j * ldo, ldo, pw, rows, lo, hi, act + j * arb, arb, 1, cols);
		return;
	}
	for (int64_t g = lo / PK_ROWS; g * PK_ROWS < hi; g++) {
		const int r = rows - g * PK_ROWS < PK_ROWS ? (int)(rows - g * PK_ROWS) : PK_ROWS;
		for (int64_t j0 = 0; j0 < n; j0 += 16) {
			const int nt = n - j0 < 16 ? (int)(n - j0) : 16;
			// A last tile of one row reads its row as it is (KS(1)).
			const uint8_t *xt = nt == 1 ? act + j0 * arb : x + j0 * nb * PKK_ROW;
			tiles[nt](pw + g * nb * psize, r, nb, xt, out + j0 * ldo + g * PK_ROWS, ldo);
		}
	}
}

#endif

#if defined(DT_AVX2)

// pk_piece is one part of a packed super-block, in order: a field of
// width bytes at src of each of the group's rows side by side (width 0
// ends a layout), or (transposed) 32 bytes at src of the rows as 8 vectors
// of the tiles' lanes.
typedef struct {
	uint8_t transposed, src, width;
} pk_piece;

#define LANES(src, width) {0, src, width}
#define TRANSPOSED(src) {1, src, 32}

// The layouts described at the top of this file.
static const pk_piece pk_q4_k[] = {LANES(0, 2),   LANES(2, 2),    LANES(4, 4),    LANES(8, 4),   LANES(12, 4),
                                   TRANSPOSED(16), TRANSPOSED(48), TRANSPOSED(80), TRANSPOSED(112), {0, 0, 0}};
static const pk_piece pk_q5_k[] = {LANES(0, 2),    LANES(2, 2),    LANES(4, 4),     LANES(8, 4),     LANES(12, 4),
                                   TRANSPOSED(16), TRANSPOSED(48), TRANSPOSED(80), TRANSPOSED(112), TRANSPOSED(144),
                                   {0, 0, 0}};
static const pk_piece pk_q6_k[] = {LANES(208, 2),   LANES(192, 4), LANES(196, 4), LANES(200, 4),  LANES(204, 4),
                                   TRANSPOSED(128), TRANSPOSED(160), TRANSPOSED(0), TRANSPOSED(32), TRANSPOSED(64),
                                   TRANSPOSED(96),  {0, 0, 0}};
static const pk_piece pk_iq4_xs[] = {LANES(0, 2),   LANES(2, 2),    LANES(4, 4),     TRANSPOSED(8),
                                     TRANSPOSED(40), TRANSPOSED(72), TRANSPOSED(104), {0, 0, 0}};
static const pk_piece pk_q3_k[] = {LANES(108, 2), LANES(96, 4),   LANES(100, 4),  LANES(104, 4),
                                   TRANSPOSED(0), TRANSPOSED(32), TRANSPOSED(64), {0, 0, 0}};
static const pk_piece pk_q2_k[] = {LANES(80, 2), LANES(82, 2), LANES(0, 4),    LANES(4, 4),    LANES(8, 4),
                                   LANES(12, 4), TRANSPOSED(16), TRANSPOSED(48), {0, 0, 0}};

// pk_pack packs a matrix of super-blocks of bsize bytes by layout. Rows
// past the last read an all-zero block: its scales are 0, so its lanes
// compute 0.
static void pk_pack(const pk_piece *layout, int bsize, uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows,
                    int64_t cols) {
	static const uint8_t zero[256];
	const int64_t nb = cols / QKK, groups = (rows + KROWS - 1) / KROWS;
	for (int64_t g = 0; g < groups; g++)
		for (int64_t b = 0; b < nb; b++) {
			uint8_t *d = dst + (g * nb + b) * KROWS * bsize;
			const uint8_t *x[KROWS];
			for (int i = 0; i < KROWS; i++) {
				const int64_t r = g * KROWS + i;
				x[i] = r < rows ? w + r * rb + b * bsize : zero;
			}
			for (const pk_piece *p = layout; p->width; p++) {
				if (p->transposed) {
#if defined(DT_AVX512)
					__m512i T[8];
					transpose32(x, p->src, T);
					for (int v = 0; v < 8; v++) _mm512_storeu_si512(d + 64 * v, T[v]);
#else
					for (int v = 0; v < 8; v++)
						for (int i = 0; i < KROWS; i++) memcpy(d + 4 * (KROWS * v + i), x[i] + p->src + 4 * v, 4);
#endif
				} else {
					for (int i = 0; i < KROWS; i++) memcpy(d + p->width * i, x[i] + p->src, p->width);
				}
				d += KROWS * p->width;
			}
		}
}

// p2k_matmul runs the AVX2 groups holding rows [lo, hi) against n
// activation rows, P2K_NT at a time.
#if !defined(DT_AVX512)
static void p2k_matmul(p2k_fn const tiles[P2K_NT + 1], int psize, float *out, int64_t ldo, const uint8_t *pw, int64_t rows,
                       int64_t lo, int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	const int64_t nb = cols / QKK;
	for (int64_t g = lo / KROWS; g * KROWS < hi; g++) {
		const int r = rows - g * KROWS < KROWS ? (int)(rows - g * KROWS) : KROWS;
		for (int64_t j0 = 0; j0 < n; j0 += P2K_NT) {
			const int nt = n - j0 < P2K_NT ? (int)(n - j0) : P2K_NT;
			tiles[nt](pw + g * nb * psize, r, nb, act + j0 * arb, arb, out + j0 * ldo + g * KROWS, ldo);
		}
	}
}
#endif

#endif

// The entry points, one pack and one product per type. The products take
// packed.c's arguments (amx unused: these types have no AMX path). A level
// that does not pack (dt_pack_rows 0) never calls its entries.
#define PK_ENTRIES(type, pack, matmul)                                                                          \
	DT_API void dt_pack_##type(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {         \
		pack;                                                                                                    \
	}                                                                                                            \
	DT_API void dt_matmul_packed_##type(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo,     \
	                                    int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols,    \
	                                    int64_t amx) {                                                           \
		(void)amx;                                                                                               \
		matmul;                                                                                                  \
	}
#define PK_NONE(type)                                                                                           \
	PK_ENTRIES(type, ((void)dst, (void)w, (void)rb, (void)rows, (void)cols),                                    \
	           ((void)out, (void)ldo, (void)pw, (void)rows, (void)lo, (void)hi, (void)act, (void)arb, (void)n, (void)cols))
#define PK_512(type, layout, size, tiles)                                                                       \
	PK_ENTRIES(type, pk_pack(layout, size, dst, w, rb, rows, cols),                                             \
	           pk45_matmul(tiles, 16 * size, out, ldo, pw, rows, lo, hi, act, arb, n, cols))
#define PK_AVX2(type, layout, size, tiles)                                                                      \
	PK_ENTRIES(type, pk_pack(layout, size, dst, w, rb, rows, cols),                                             \
	           p2k_matmul(tiles, 8 * size, out, ldo, pw, rows, lo, hi, act, arb, n, cols))

#if defined(DT_AVX512)
PK_512(q4_k, pk_q4_k, Q4_K_SIZE, pq4_k_tiles)
PK_512(q5_k, pk_q5_k, Q5_K_SIZE, pq5_k_tiles)
PK_512(q6_k, pk_q6_k, Q6_K_SIZE, pq6_k_tiles)
PK_512(q2_k, pk_q2_k, Q2_K_SIZE, pq2_k_tiles)
PK_512(q3_k, pk_q3_k, Q3_K_SIZE, pq3_k_tiles)
PK_512(iq4_xs, pk_iq4_xs, IQ4_XS_SIZE, piq4_xs_tiles)
#elif defined(DT_AVX2)
PK_AVX2(q4_k, pk_q4_k, Q4_K_SIZE, p2k_q4_k_tiles)
PK_AVX2(q5_k, pk_q5_k, Q5_K_SIZE, p2k_q5_k_tiles)
PK_AVX2(q6_k, pk_q6_k, Q6_K_SIZE, p2k_q6_k_tiles)
PK_AVX2(q2_k, pk_q2_k, Q2_K_SIZE, p2k_q2_k_tiles)
PK_AVX2(q3_k, pk_q3_k, Q3_K_SIZE, p2k_q3_k_tiles)
PK_AVX2(iq4_xs, pk_iq4_xs, IQ4_XS_SIZE, p2k_iq4_xs_tiles)
#else
PK_NONE(q4_k)
PK_NONE(q5_k)
PK_NONE(q6_k)
PK_NONE(q2_k)
PK_NONE(q3_k)
PK_NONE(iq4_xs)
#endif
