// The AVX-512 matmul scheme shared by the weight types: a tile is 16 weight
// rows × up to 16 activation rows. The weights of one block of the 16 rows
// are transposed so that zmm lane i holds four consecutive weights of row i;
// one vpdpbusd with four activation bytes broadcast from memory then advances
// 16 row dot products at once. Each result lane is a whole row's dot, so the
// per-block scales apply lane by lane and nothing is reduced horizontally,
// and each activation row costs 8 vpdpbusd per 16 weight blocks plus 3 float
// ops. Transposing (about 3 shuffles per 32 weights) is paid once per block
// of weights, whatever the number of activation rows, so verifying 16 tokens
// costs the 16 rows' vpdpbusd and little else. Those are the floor: vpdpbusd
// zmm issues on one port, one per cycle, so 16 rows need 8 cycles per
// 32-weight block, which is more than streaming a Q4_0 block from memory
// takes (about 3 cycles at 13.5 GB/s) and about 1.6 times a Q8_0 block.
//
// vpdpbusd multiplies unsigned by signed bytes. The activations stay signed
// (they come from memory as broadcasts); the weights are made unsigned —
// Q8_0 by adding 128, Q4_0 nibbles are already 0..15 — and the constant
// that adds, off × (sum of the activation block), is subtracted through the
// accumulator's initial value, precomputed per activation block. So the
// integer part of every block's dot is exact.
#ifndef DOVETAIL_TILE512_H
#define DOVETAIL_TILE512_H
#include "common.h"
#include "q8a.h"

#if defined(DT_AVX512)

// TAB_MAX bounds the q8a table on the stack (64 KiB); larger problems are
// cut into chunks of columns, each added into out.
#define TAB_MAX 8192

// tile_fn computes one tile: w at its first row, act at its first row, tab
// at that row's entries (row stride ts), out at out[j0*ldo + r0]. add: add to
// out rather than store (every column chunk after the first).
typedef void (*tile_fn)(const uint8_t *w, int64_t rb, int rows, int64_t b0, int64_t nbc, const uint8_t *act,
                        int64_t arb, const q8a *tab, int64_t ts, float *out, int64_t ldo, int add);

// q8a_matmul runs a weight type's tiles over the whole product. Row tiles
// are outside activation tiles so that a tile's weights, once read from
// memory, serve every activation row from cache.
__attribute__((unused)) static void q8a_matmul(tile_fn const tiles[17], int32_t off, float *out, int64_t ldo, const uint8_t *w, int64_t rb,
                       int64_t lo, int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	q8a tab[TAB_MAX];
	const int64_t nb = cols / QK;
	const int64_t jc = n < 256 ? n : 256;
	int64_t kc = TAB_MAX / jc;
	if (kc > nb) kc = nb;
	for (int64_t jb = 0; jb < n; jb += jc) {
		const int64_t jn = n - jb < jc ? n - jb : jc;
		for (int64_t b0 = 0; b0 < nb; b0 += kc) {
			const int64_t nbc = nb - b0 < kc ? nb - b0 : kc;
			q8a_prep(tab, nbc, 1, act + jb * arb, arb, jn, b0, nbc, off, 0);
			for (int64_t r0 = lo; r0 < hi; r0 += 16) {
				const int rows = hi - r0 < 16 ? (int)(hi - r0) : 16;
				for (int64_t j0 = 0; j0 < jn; j0 += 16) {
					const int nt = jn - j0 < 16 ? (int)(jn - j0) : 16;
					tiles[nt](w + r0 * rb, rb, rows, b0, nbc, act + (jb + j0) * arb, arb, tab + j0 * nbc, nbc,
					          out + (jb + j0) * ldo + r0, ldo, b0 > 0);
				}
			}
		}
	}
}

// tile_rows points p at the tile's rows, repeating the last one in a
// partial tile (its lanes are computed and not stored), and returns the row
// offsets for gathering per-row block headers.
DT_INLINE __m512i tile_rows(const uint8_t *w, int64_t rb, int rows, const uint8_t *p[16]) {
	int32_t offs[16];
	#pragma GCC unroll 16
	for (int i = 0; i < 16; i++) {
		int r = i < rows ? i : rows - 1;
		p[i] = w + r * rb;
		offs[i] = (int32_t)(r * rb);
	}
	return _mm512_loadu_si512(offs);
}

// ld2x256 loads 32 bytes at a and b into the two halves of a zmm. The
// upper half comes in as a merging broadcast rather than vinserti64x4:
// that merge runs on two ports, the insert only on the shuffle port, which
// the transposes keep busy.
DT_INLINE __m512i ld2x256(const uint8_t *a, const uint8_t *b) {
	return _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)), 0xf0,
	                                   _mm256_loadu_si256((const __m256i *)b));
}

// ld4x128 loads 16 bytes at a, b, c and d into the four lanes of a zmm,
// as two ymm (inserts on three ports) and one merging broadcast.
DT_INLINE __m512i ld4x128(const uint8_t *a, const uint8_t *b, const uint8_t *c, const uint8_t *d) {
	__m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
	                                     _mm_loadu_si128((const __m128i *)b), 1);
	__m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)c)),
	                                     _mm_loadu_si128((const __m128i *)d), 1);
	return _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(lo), 0xf0, hi);
}

// transpose32 loads 32 bytes at offset o of the 16 rows and returns in W[g]
// bytes 4g..4g+3 of every row, row i in lane i.
DT_INLINE void transpose32(const uint8_t *const p[16], int64_t o, __m512i W[8]) {
	// z holds rows (k, k+4) and (8+k, 12+k) so that the transposed lanes
	// come out in row order.
	__m512i z0 = ld2x256(p[0] + o, p[4] + o), z1 = ld2x256(p[1] + o, p[5] + o);
	__m512i z2 = ld2x256(p[2] + o, p[6] + o), z3 = ld2x256(p[3] + o, p[7] + o);
	__m512i z4 = ld2x256(p[8] + o, p[12] + o), z5 = ld2x256(p[9] + o, p[13] + o);
	__m512i z6 = ld2x256(p[10] + o, p[14] + o), z7 = ld2x256(p[11] + o, p[15] + o);
	__m512i t0 = _mm512_unpacklo_epi32(z0, z1), t1 = _mm512_unpackhi_epi32(z0, z1);
	__m512i t2 = _mm512_unpacklo_epi32(z2, z3), t3 = _mm512_unpackhi_epi32(z2, z3);
	__m512i t4 = _mm512_unpacklo_epi32(z4, z5), t5 = _mm512_unpackhi_epi32(z4, z5);
	__m512i t6 = _mm512_unpacklo_epi32(z6, z7), t7 = _mm512_unpackhi_epi32(z6, z7);
	__m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
	__m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
	__m512i u4 = _mm512_unpacklo_epi64(t4, t6), u5 = _mm512_unpackhi_epi64(t4, t6);
	__m512i u6 = _mm512_unpacklo_epi64(t5, t7), u7 = _mm512_unpackhi_epi64(t5, t7);
	W[0] = _mm512_shuffle_i32x4(u0, u4, 0x88), W[4] = _mm512_shuffle_i32x4(u0, u4, 0xdd);
	W[1] = _mm512_shuffle_i32x4(u1, u5, 0x88), W[5] = _mm512_shuffle_i32x4(u1, u5, 0xdd);
	W[2] = _mm512_shuffle_i32x4(u2, u6, 0x88), W[6] = _mm512_shuffle_i32x4(u2, u6, 0xdd);
	W[3] = _mm512_shuffle_i32x4(u3, u7, 0x88), W[7] = _mm512_shuffle_i32x4(u3, u7, 0xdd);
}

// transpose20 loads the same 32 bytes as transpose32 but returns only
// bytes 0..19 of every row, as T[0..4]: a Q4_0 kernel reads its 16 bytes of
// nibbles and, in T[4], the next block's scale, which spares it loading the
// scales separately.
DT_INLINE void transpose20(const uint8_t *const p[16], int64_t o, __m512i T[5]) {
	__m512i z0 = ld2x256(p[0] + o, p[4] + o), z1 = ld2x256(p[1] + o, p[5] + o);
	__m512i z2 = ld2x256(p[2] + o, p[6] + o), z3 = ld2x256(p[3] + o, p[7] + o);
	__m512i z4 = ld2x256(p[8] + o, p[12] + o), z5 = ld2x256(p[9] + o, p[13] + o);
	__m512i z6 = ld2x256(p[10] + o, p[14] + o), z7 = ld2x256(p[11] + o, p[15] + o);
	__m512i t0 = _mm512_unpacklo_epi32(z0, z1), t1 = _mm512_unpackhi_epi32(z0, z1);
	__m512i t2 = _mm512_unpacklo_epi32(z2, z3), t3 = _mm512_unpackhi_epi32(z2, z3);
	__m512i t4 = _mm512_unpacklo_epi32(z4, z5), t5 = _mm512_unpackhi_epi32(z4, z5);
	__m512i t6 = _mm512_unpacklo_epi32(z6, z7), t7 = _mm512_unpackhi_epi32(z6, z7);
	__m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
	__m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
	__m512i u4 = _mm512_unpacklo_epi64(t4, t6), u5 = _mm512_unpackhi_epi64(t4, t6);
	__m512i u6 = _mm512_unpacklo_epi64(t5, t7), u7 = _mm512_unpackhi_epi64(t5, t7);
	T[0] = _mm512_shuffle_i32x4(u0, u4, 0x88), T[4] = _mm512_shuffle_i32x4(u0, u4, 0xdd);
	T[1] = _mm512_shuffle_i32x4(u1, u5, 0x88);
	T[2] = _mm512_shuffle_i32x4(u2, u6, 0x88);
	T[3] = _mm512_shuffle_i32x4(u3, u7, 0x88);
}

// transpose16 is transpose32 for 16 bytes per row: T[g] holds bytes
// 4g..4g+3 of every row.
DT_INLINE void transpose16(const uint8_t *const p[16], int64_t o, __m512i T[4]) {
	__m512i z[4];
	#pragma GCC unroll 16
	for (int k = 0; k < 4; k++) {
		__m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p[k] + o)));
		v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[4 + k] + o)), 1);
		v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[8 + k] + o)), 2);
		z[k] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[12 + k] + o)), 3);
	}
	__m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
	__m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
	T[0] = _mm512_unpacklo_epi64(t0, t2), T[1] = _mm512_unpackhi_epi64(t0, t2);
	T[2] = _mm512_unpacklo_epi64(t1, t3), T[3] = _mm512_unpackhi_epi64(t1, t3);
}

// f16_lanes gathers the f16 at offset o of every row of the tile.
DT_INLINE __m512 f16_lanes(const uint8_t *w, __m512i vidx, int64_t o) {
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(vidx, w + o, 1)));
}

// f16_rows is f16_lanes by scalar loads.
DT_INLINE __m512 f16_rows(const uint8_t *const p[16], int64_t o) {
	__m128i a = _mm_cvtsi32_si128(ld16(p[0] + o)), b = _mm_cvtsi32_si128(ld16(p[8] + o));
	a = _mm_insert_epi16(a, ld16(p[1] + o), 1); b = _mm_insert_epi16(b, ld16(p[9] + o), 1);
	a = _mm_insert_epi16(a, ld16(p[2] + o), 2); b = _mm_insert_epi16(b, ld16(p[10] + o), 2);
	a = _mm_insert_epi16(a, ld16(p[3] + o), 3); b = _mm_insert_epi16(b, ld16(p[11] + o), 3);
	a = _mm_insert_epi16(a, ld16(p[4] + o), 4); b = _mm_insert_epi16(b, ld16(p[12] + o), 4);
	a = _mm_insert_epi16(a, ld16(p[5] + o), 5); b = _mm_insert_epi16(b, ld16(p[13] + o), 5);
	a = _mm_insert_epi16(a, ld16(p[6] + o), 6); b = _mm_insert_epi16(b, ld16(p[14] + o), 6);
	a = _mm_insert_epi16(a, ld16(p[7] + o), 7); b = _mm_insert_epi16(b, ld16(p[15] + o), 7);
	return _mm512_cvtph_ps(_mm256_set_m128i(b, a));
}

// prefetch_rows asks for the bytes [o, o+len) of every row of the tile,
// some iterations ahead: sixteen interleaved row streams that advance a few
// dozen bytes per iteration are more than the hardware prefetchers follow,
// and without this the kernels wait on memory instead of overlapping it.
#define PF_AHEAD 192
DT_INLINE void prefetch_rows(const uint8_t *const p[16], int64_t o, int len) {
	#pragma GCC unroll 16
	for (int i = 0; i < 16; i++)
		#pragma GCC unroll 4
		for (int k = 0; k < len; k += 64) _mm_prefetch((const char *)p[i] + o + PF_AHEAD + k, _MM_HINT_T0);
}

// store_tile writes (or adds) the rows of a tile's output lanes.
DT_INLINE void store_tile(float *out, int rows, __m512 v, int add) {
	__mmask16 m = rows == 16 ? (__mmask16)0xffff : (__mmask16)((1u << rows) - 1);
	if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out));
	_mm512_mask_storeu_ps(out, m, v);
}

// dpbusd_bc is vpdpbusd against 4 bytes at x broadcast, as one
// instruction (an embedded broadcast, which the compiler does not emit).
DT_INLINE __m512i dpbusd_bc(__m512i s, __m512i w, const uint8_t *x) {
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(w), "m"(*(const int32_t *)x));
	return s;
}

// dot8 is the 8 vpdpbusd of one activation block against W, for one
// activation row; its chain is split in four because with few activation
// rows the latency of dependent vpdpbusd would otherwise show.
DT_INLINE __m512i dot8(__m512i s, const __m512i W[8], const uint8_t *x) {
	__m512i s1 = _mm512_setzero_si512(), s2 = _mm512_setzero_si512(), s3 = _mm512_setzero_si512();
	s = _mm512_dpbusd_epi32(s, W[0], _mm512_set1_epi32(ld32(x)));
	s1 = _mm512_dpbusd_epi32(s1, W[1], _mm512_set1_epi32(ld32(x + 4)));
	s2 = _mm512_dpbusd_epi32(s2, W[2], _mm512_set1_epi32(ld32(x + 8)));
	s3 = _mm512_dpbusd_epi32(s3, W[3], _mm512_set1_epi32(ld32(x + 12)));
	s = _mm512_dpbusd_epi32(s, W[4], _mm512_set1_epi32(ld32(x + 16)));
	s1 = _mm512_dpbusd_epi32(s1, W[5], _mm512_set1_epi32(ld32(x + 20)));
	s2 = _mm512_dpbusd_epi32(s2, W[6], _mm512_set1_epi32(ld32(x + 24)));
	s3 = _mm512_dpbusd_epi32(s3, W[7], _mm512_set1_epi32(ld32(x + 28)));
	return _mm512_add_epi32(_mm512_add_epi32(s, s1), _mm512_add_epi32(s2, s3));
}

// dot8x4 is dot8 for four activation rows at once, interleaved so that
// four independent chains hide vpdpbusd's latency.
DT_INLINE void dot8x4(__m512i s[4], const __m512i W[8], const uint8_t *x, int64_t arb) {
#pragma GCC unroll 8
	for (int g = 0; g < 8; g++)
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) s[i] = _mm512_dpbusd_epi32(s[i], W[g], _mm512_set1_epi32(ld32(x + i * arb + 4 * g)));
}

// acc_block_min adds one block's products into the NT activation rows'
// accumulators: W the block's 16 transposed weight rows (unsigned), dw their
// scales, x the block's quants in the first activation row (row j's at
// x + j*xs), t the first row's table entry of the block (row j's at
// t[j*tj]). With MIN the
// weights have a minimum (mw, the 16 rows'): each dot starts at 0 and the
// minimum's term, mw*dy*sum(y), follows the scaled dot. Every AVX-512 tile
// does exactly this per block, so that their results agree bit for bit.
DT_INLINE void acc_block_min(const int NT, const int MIN, __m512 acc[16], const __m512i W[8], __m512 dw, __m512 mw,
                             const uint8_t *x, int64_t xs, const q8a *t, int64_t tj) {
	int j = 0;
	#pragma GCC unroll 4
	for (; j + 4 <= NT; j += 4) {
		__m512i s[4];
		#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) s[i] = MIN ? _mm512_setzero_si512() : _mm512_set1_epi32(t[(j + i) * tj].c);
		dot8x4(s, W, x + j * xs, xs);
		#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			const q8a e = t[(j + i) * tj];
			acc[j + i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]), _mm512_mul_ps(dw, _mm512_set1_ps(e.d)), acc[j + i]);
			if (MIN) acc[j + i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(e.s), acc[j + i]);
		}
	}
	#pragma GCC unroll 4
	for (; j < NT; j++) {
		const q8a e = t[j * tj];
		__m512i s = dot8(MIN ? _mm512_setzero_si512() : _mm512_set1_epi32(e.c), W, x + j * xs);
		acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(e.d)), acc[j]);
		if (MIN) acc[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(e.s), acc[j]);
	}
}

// acc_block is acc_block_min for weights offset by a constant (the
// correction in tab's start values), from activation rows arb bytes apart
// and a table of rows ts entries apart (entry b).
DT_INLINE void acc_block(const int NT, __m512 acc[16], const __m512i W[8], __m512 dw, const uint8_t *x, int64_t arb,
                         const q8a *tab, int64_t ts, int64_t b) {
	acc_block_min(NT, 0, acc, W, dw, dw, x, arb, tab + b, ts);
}

// NT_VARIANTS instantiates M(name, NT) for NT = 1..16 (functions named
// name_NT, whose activation-row count is a constant the compiler unrolls)
// and table, those functions of type type indexed by NT (entry 0 unused).
#define NT_VARIANTS(M, type, name, table)                                                                        \
	M(name, 1) M(name, 2) M(name, 3) M(name, 4) M(name, 5) M(name, 6) M(name, 7) M(name, 8) M(name, 9)           \
	M(name, 10) M(name, 11) M(name, 12) M(name, 13) M(name, 14) M(name, 15) M(name, 16)                          \
	static type const table[17] = {0,          name##_1,  name##_2,  name##_3,  name##_4,  name##_5,             \
	                               name##_6,  name##_7,  name##_8,  name##_9,  name##_10, name##_11,            \
	                               name##_12, name##_13, name##_14, name##_15, name##_16};

#define TILE_FNS(name) NT_VARIANTS(TILE_FN, tile_fn, name, name##_tiles)

#define TILE_FN(name, NT)                                                                                  \
	static void name##_##NT(const uint8_t *w, int64_t rb, int rows, int64_t b0, int64_t nbc,               \
	                        const uint8_t *act, int64_t arb, const q8a *tab, int64_t ts, float *out,        \
	                        int64_t ldo, int add) {                                                         \
		name(NT, w, rb, rows, b0, nbc, act, arb, tab, ts, out, ldo, add);                                  \
	}

#endif
#endif
