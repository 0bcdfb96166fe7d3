// Packed Q8_0 and Q4_0 weights: the AVX-512 level's own layout, made once
// when a model loads, so that a matrix product streams one contiguous run
// of memory and does no transposing.
//
// In the GGUF layout a 16-row tile reads sixteen interleaved streams that
// advance 34 bytes a block each: on the 768-wide rows of small models that
// kept decode at 6-8 GB/s where a linear read gets 12, and every block paid
// about 30 shuffles to transpose. Packed, rows go in groups of 16 (the last
// one padded with zero rows) and each group's blocks follow one another:
//
//	Q8_0, 544 bytes a block: the 16 rows' f16 scales (32 bytes), then 8
//	      vectors of 64 bytes, vector g lane i = weights 4g..4g+3 of row i
//	      plus 128 (unsigned, for vpdpbusd);
//	Q4_0, 288 bytes a block: the 16 scales, then 4 vectors, vector g lane
//	      i = nibble bytes 4g..4g+3 of row i (low nibbles are weights
//	      4g..4g+3, high ones 16+4g..16+4g+3, each q+8).
//
//	Q5_0, 352 bytes a block: Q4_0's 288, then the 16 rows' qh (u32,
//	      bit v the fifth bit of value v), one vector.
//	IQ4_NL, Q4_0's layout: its nibbles index ggml's kvalues_iq4nl, whose
//	      values plus 128 a vpshufb makes of them (unsigned, for
//	      vpdpbusd).
//	Q4_1, 320 bytes a block: the 16 scales, the 16 minimums (f16), then
//	      Q4_0's 4 vectors (values q, 0..15: value q*d + m).
//	Q5_1, 384 bytes a block: Q4_1's 320, then the 16 rows' qh.
//
// That is the same number of bytes as the GGUF rows, and the vectors are
// already in the layout of an AMX B tile (K/4 rows of 16 four-byte
// columns), so with AMX one tdpbsud multiplies a block of 16 weight rows by
// a block of up to 16 activation rows.
//
// The arithmetic is the unpacked AVX-512 kernels': an exact int32 block
// dot, corrected by -off*sum(activation block) through its start value, then
// acc = fma(float(dot), dw*dx, acc) block after block (and for Q4_1 and
// Q5_1 acc = fma(m, dx*sum(x), acc) after it). Blocks are taken in
// pieces of PK_KC whatever n is, each piece's sum added into out, so the
// result for an activation row is bit for bit the same with 1 row or 64,
// with AMX or without: verifying a tree scores its nodes exactly as decoding
// them one by one would.
//
// The AVX2 level packs the same types in groups of 8 rows (packed_avx2.h)
// and runs them through the same chunks and tables below, with tiles of up
// to 4 activation rows; its results are the AVX-512 tiles' bit for bit.
#include "tile512.h"
#include "packed_avx2.h"
#include "packed.h"

#if defined(DT_AVX512)
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
#endif

// PK_LEVEL: this level packs. PK_ROWS is its row group, PK_NT the most
// activation rows one of its tiles multiplies.
#if defined(DT_AVX512)
#define PK_LEVEL 1
#define PK_ROWS 16
#define PK_NT 16
#elif defined(DT_AVX2)
#define PK_LEVEL 1
#define PK_ROWS P2_ROWS
#define PK_NT P2_NT
#endif
#if defined(DT_AVX512) || defined(DT_AVXVNNI)
#define PK_Q8_OFF 128 // vpdpbusd's weights are unsigned
#define PK_NL_OFF 128
#else
#define PK_NL_OFF 0 // AVX2's IQ4_NL tiles take ggml's sign trick
#define PK_Q8_OFF 0
#endif
#define PK_Q8_0 (PK_ROWS * 34)
#define PK_Q4_0 (PK_ROWS * 18)
#define PK_Q5_0 (PK_ROWS * 22)
#define PK_Q4_1 (PK_ROWS * Q4_1_SIZE)
#define PK_Q5_1 (PK_ROWS * Q5_1_SIZE)
#define Q5_0_BYTES 22 // a GGUF Q5_0 block: f16 scale, u32 qh, 16 bytes of nibbles
#define PK_KC 128 // blocks summed before out is added to (4096 columns)
#define PK_JC 64  // activation rows per chunk
#ifndef AMX_MIN_ROWS
#define AMX_MIN_ROWS 8 // fewer rows in an activation tile go to the AVX-512 tiles
#endif

// dt_pack_rows is the row group of the packed layout, or 0 where this level
// multiplies from the GGUF layout.
DT_API int64_t dt_pack_rows(void) {
#if defined(PK_LEVEL)
	return PK_ROWS;
#else
	return 0;
#endif
}

#if defined(DT_AVX512)

// row_or_zero points at row r's block b, or at a zero block past the last
// row, so that padded lanes compute 0 with scale 0.
DT_INLINE const uint8_t *row_or_zero(const uint8_t *w, int64_t rb, int64_t r, int64_t rows, int64_t o, const uint8_t *zero) {
	return r < rows ? w + r * rb + o : zero;
}

#endif

#if defined(PK_LEVEL)

// pk_kind is what the products over Q8_0 activations need of their
// weight type (pk_args.type PK_TYPE_Q8_0, _Q4_0, _Q5_0, _IQ4_NL, _Q4_1,
// _Q5_1): a GGUF block's bytes, a packed group's block's, what the
// unsigned weights are offset by (AVX2 keeps Q8_0's signed: 0), a block
// standing for the rows past the last (scale 0, so their lanes compute 0;
// a Q4_0 zero row's nibbles are 8, q = 0, so its block dot is the
// correction alone); and where a GGUF block keeps its parts: heads f16
// (the scale, and Q4_1's and Q5_1's minimum), its values at vo, its fifth
// bits at qh (0: none); min, whether the weights have a minimum.
typedef struct {
	int64_t block, packed;
	int32_t off;
	const uint8_t *zero;
	int heads, vo, qh, min;
} pk_kind;

static const pk_kind *pk_kind_of(int64_t type) {
	static const uint8_t zero8[Q8_0_SIZE], zero5[Q5_0_BYTES];
	static const uint8_t zero4[Q4_0_SIZE] = {0, 0, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
	                                         0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
	static const pk_kind q8 = {Q8_0_SIZE, PK_Q8_0, PK_Q8_OFF, zero8, 1, 2, 0, 0},
	                     q4 = {Q4_0_SIZE, PK_Q4_0, 8, zero4, 1, 2, 0, 0},
	                     q5 = {Q5_0_BYTES, PK_Q5_0, 16, zero5, 1, 6, 2, 0},
	                     nl = {IQ4_NL_SIZE, PK_Q4_0, PK_NL_OFF, zero8, 1, 2, 0, 0},
	                     q41 = {Q4_1_SIZE, PK_Q4_1, 0, zero8, 2, 4, 0, 1},
	                     q51 = {Q5_1_SIZE, PK_Q5_1, 0, zero8, 2, 8, 4, 1};
	switch (type) {
	case PK_TYPE_Q8_0: return &q8;
	case PK_TYPE_Q4_0: return &q4;
	case PK_TYPE_IQ4_NL: return &nl;
	case PK_TYPE_Q4_1: return &q41;
	case PK_TYPE_Q5_1: return &q51;
	default: return &q5;
	}
}

// pk_pack packs a matrix of one of pk_kind_of's types: per row group and
// block the rows' f16 heads (every row's scale, then every row's minimum),
// then their values transposed into lanes (and the fifth bits, a u32 a
// lane).
static void pk_pack(int type, uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {
	const pk_kind *kind = pk_kind_of(type);
#if !defined(DT_AVX512)
	p2_pack(dst, w, rb, rows, cols, kind->block, kind->packed, type == PK_TYPE_Q8_0 ? 8 : 4, kind->heads, kind->vo, kind->qh,
	        type == PK_TYPE_Q8_0 && PK_Q8_OFF ? 0x80 : 0, kind->zero);
#else
	const int64_t bs = kind->block, pb = kind->packed, vo = 32 * kind->heads;
	const int64_t nb = cols / QK, groups = (rows + PK_ROWS - 1) / PK_ROWS;
	for (int64_t g = 0; g < groups; g++)
		for (int64_t b = 0; b < nb; b++) {
			uint8_t *d = dst + (g * nb + b) * pb;
			const uint8_t *x[PK_ROWS];
			for (int i = 0; i < PK_ROWS; i++) {
				x[i] = row_or_zero(w, rb, g * PK_ROWS + i, rows, b * bs, kind->zero);
				for (int h = 0; h < kind->heads; h++) memcpy(d + 32 * h + 2 * i, x[i] + 2 * h, 2);
			}
			__m512i W[8];
			if (type == PK_TYPE_Q8_0) {
				transpose32(x, 2, W);
				for (int k = 0; k < 8; k++) W[k] = _mm512_xor_si512(W[k], _mm512_set1_epi8((char)0x80));
			} else {
				transpose16(x, kind->vo, W);
			}
			for (int k = 0; k < (type == PK_TYPE_Q8_0 ? 8 : 4); k++) _mm512_storeu_si512(d + vo + 64 * k, W[k]);
			if (kind->qh)
				for (int i = 0; i < PK_ROWS; i++) memcpy(d + vo + 256 + 4 * i, x[i] + kind->qh, 4);
		}
#endif
}

#endif

#if defined(DT_AVX512)

// Weight vectors of one packed block, in the order dot8 takes them.
DT_INLINE void pq8_0_block(const uint8_t *pb, __m512i W[8]) {
	#pragma GCC unroll 8
	for (int g = 0; g < 8; g++) W[g] = _mm512_loadu_si512(pb + 32 + 64 * g);
}

// pq4_nibbles unpacks the 4 vectors of nibbles at v: W[g] the low
// nibbles of vector g (values 4g..4g+3 of each row), W[g+4] the high ones.
DT_INLINE void pq4_nibbles(const uint8_t *v, __m512i W[8]) {
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		const __m512i t = _mm512_loadu_si512(v + 64 * g);
		W[g] = _mm512_and_si512(t, m4);
		W[g + 4] = _mm512_and_si512(_mm512_srli_epi16(t, 4), m4);
	}
}

DT_INLINE void pq4_0_block(const uint8_t *pb, __m512i W[8]) { pq4_nibbles(pb + 32, W); }
DT_INLINE void pq4_1_block(const uint8_t *pb, __m512i W[8]) { pq4_nibbles(pb + 64, W); }

// pqnl_block unpacks a packed IQ4_NL block as pq4_0_block does, each
// nibble made its value plus 128.
DT_INLINE void pqnl_block(const uint8_t *pb, __m512i W[8]) {
	pq4_0_block(pb, W);
	const __m512i lut = _mm512_broadcast_i32x4(iq4_lut_u());
	#pragma GCC unroll 8
	for (int g = 0; g < 8; g++) W[g] = _mm512_shuffle_epi8(lut, W[g]);
}

// pq5_fifth unpacks the vectors of nibbles at v as pq4_nibbles does, each
// value's fifth bit (the rows' qh at h) added as 16 (values 0..31):
// vector G holds values 4G..4G+3, whose fifth bits are bits 4(G%2).. of
// qh's byte G/2.
DT_INLINE void pq5_fifth(const uint8_t *v, const uint8_t *h, __m512i W[8]) {
	pq4_nibbles(v, W);
	const __m512i H = _mm512_loadu_si512(h), sixteen = _mm512_set1_epi8(16);
	const __m512i lanes = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0);
	#pragma GCC unroll 8
	for (int G = 0; G < 8; G++) {
		const __m512i hb = _mm512_shuffle_epi8(H, _mm512_add_epi8(lanes, _mm512_set1_epi8((char)(G / 2))));
		const __mmask64 m = _mm512_test_epi8_mask(hb, _mm512_set1_epi32(G % 2 ? (int)0x80402010 : 0x08040201));
		W[G] = _mm512_mask_add_epi8(W[G], m, W[G], sixteen);
	}
}

// pq5_0_block: Q5_0's values q+16; pq5_1_block: Q5_1's q.
DT_INLINE void pq5_0_block(const uint8_t *pb, __m512i W[8]) { pq5_fifth(pb + 32, pb + 288, W); }
DT_INLINE void pq5_1_block(const uint8_t *pb, __m512i W[8]) { pq5_fifth(pb + 64, pb + 320, W); }

// PF_BYTES: how far ahead of the block being multiplied the packed stream
// is prefetched. One linear stream is what the hardware prefetcher follows
// best, and this keeps a few more lines in flight than it does alone.
#ifndef PF_BYTES
#define PF_BYTES 8192
#endif

// pk_tile multiplies one group (at its block b0) by NT activation rows over
// nbc blocks, with the tile's accumulators in registers. PB and unpack fix
// the weight type, MO where its minimums are (0: it has none). xp and tt are
// the tile's activations and table as pk_prep lays them out (block after
// block, the NT rows' quants or entries one after another), so that every
// address a block takes is a constant offset from one pointer: with the rows
// arb bytes apart, 16 rows' addresses outgrew the general registers and a
// block spent more instructions on them than on its 128 vpdpbusd
// (docs/measurements/kernels-products.md, "The tiles' activations laid out").
#define PK_TILE(name, PB, unpack, MO)                                                                            \
	DT_INLINE void name(const int NT, const uint8_t *pg, int rows, int64_t b0, int64_t nbc, const uint8_t *xp,   \
	                    const q8a *tt, float *out, int64_t ldo, int add) {                                       \
		__m512 acc[16];                                                                                          \
		_Pragma("GCC unroll 16") for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();                     \
		const uint8_t *pb = pg;                                                                                  \
		for (int64_t b = 0; b < nbc; b++, pb += PB) {                                                            \
			_Pragma("GCC unroll 9") for (int k = 0; k < PB; k += 64) _mm_prefetch((const char *)pb + PF_BYTES + k, \
			                                                                     _MM_HINT_T0);                  \
			__m512i W[8];                                                                                        \
			unpack(pb, W);                                                                                       \
			const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));                          \
			const __m512 mw = MO ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pb + MO))) : dw;           \
			acc_block_min(NT, MO != 0, acc, W, dw, mw, xp + (b0 + b) * NT * QK, QK, tt + (b0 + b) * NT, 1);      \
		}                                                                                                        \
		_Pragma("GCC unroll 16") for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], add);     \
	}

PK_TILE(pq8_0_tile, PK_Q8_0, pq8_0_block, 0)
PK_TILE(pq4_0_tile, PK_Q4_0, pq4_0_block, 0)
PK_TILE(pq5_0_tile, PK_Q5_0, pq5_0_block, 0)
PK_TILE(pqnl_tile, PK_Q4_0, pqnl_block, 0)
PK_TILE(pq4_1_tile, PK_Q4_1, pq4_1_block, 32)
PK_TILE(pq5_1_tile, PK_Q5_1, pq5_1_block, 32)

typedef void (*pk_fn)(const uint8_t *pg, int rows, int64_t b0, int64_t nbc, const uint8_t *xp, const q8a *tt,
                      float *out, int64_t ldo, int add);

#define PK_FN(name, NT)                                                                                         \
	static void name##_##NT(const uint8_t *pg, int rows, int64_t b0, int64_t nbc, const uint8_t *xp,           \
	                        const q8a *tt, float *out, int64_t ldo, int add) {                                 \
		name(NT, pg, rows, b0, nbc, xp, tt, out, ldo, add);                                                     \
	}
#define PK_FNS(name) NT_VARIANTS(PK_FN, pk_fn, name, name##_fns)

PK_FNS(pq8_0_tile)
PK_FNS(pq4_0_tile)
PK_FNS(pq5_0_tile)
PK_FNS(pqnl_tile)
PK_FNS(pq4_1_tile)
PK_FNS(pq5_1_tile)

// ---- AMX ----------------------------------------------------------------
//
// Every tile is 16 rows: 0 and 1 accumulate, 4 and 5 hold activations (16
// rows of one 32-byte block), 6 and 7 the weights of one block (8 rows of
// 64 bytes). Two blocks are in flight, so that the tile unit multiplies one
// while the vector units scale the other's products. (Issuing the next pair
// into accumulators 2 and 3 before scaling this one measured slower for
// Q8_0 on this Sapphire Rapids VM: a tdpbsud of 16x16x32 costs ~13 ns, a
// tile store ~8 ns, and they did not overlap the scaling.) A partial activation
// tile (fewer than 16 rows) is copied, zero-padded, into a buffer first, so
// that the tile loads never read past the activations. The float part is
// pk_tile's, row by row, so the two agree bit for bit.

#pragma GCC push_options
#pragma GCC target("amx-tile,amx-int8")

typedef struct {
	uint8_t palette, start;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} amx_cfg;

static void amx_begin(void) {
	amx_cfg c;
	memset(&c, 0, sizeof c);
	c.palette = 1;
	for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
	c.colsb[4] = c.colsb[5] = 32;
	c.rows[6] = c.rows[7] = 8;
	// GCC 12 does not see that ldtilecfg reads c and drops the stores.
	__asm__ volatile("" : : "r"(&c) : "memory");
	_tile_loadconfig(&c);
}

static void amx_end(void) { _tile_release(); }

// amx_post adds one block's products (C: 16 rows of 16 int32, NT used)
// into acc, as pk_tile does. Q8_0's products need the correction of its
// +128 weights; Q4_0's are unpacked signed and need none.
DT_INLINE void amx_post(const int NT, const int Q4, __m512 acc[16], const int32_t *C, const q8a *tab, int64_t ts,
                        int64_t b, __m512 dw) {
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) {
		const q8a t = tab[j * ts + b];
		__m512i s = _mm512_load_si512(C + 16 * j);
		if (!Q4) s = _mm512_add_epi32(s, _mm512_set1_epi32(t.c));
		acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(t.d)), acc[j]);
	}
}

// amx_unpack_q4 writes a packed Q4_0 block's weights as a B tile of signed
// bytes (q, not q+8), so that tdpbssd gives the exact block dot.
DT_INLINE void amx_unpack_q4(uint8_t *dst, const uint8_t *pb) {
	__m512i W[8];
	pq4_0_block(pb, W);
	#pragma GCC unroll 8
	for (int k = 0; k < 8; k++) _mm512_store_si512(dst + 64 * k, _mm512_sub_epi8(W[k], _mm512_set1_epi8(8)));
}

// AMX_ISSUE starts block blk's product in accumulator T, with activations
// in tile A and weights in tile B (a macro over amx_tile's locals: tile
// numbers must be compile-time constants). Q8_0's B tile is read in place. Q4_0's
// are unpacked two blocks ahead into a ring of four in L1: unpacking a
// whole chunk first had every tile load come back from L2, and a tile load
// right behind the stores that wrote its data waits for them.
#define AMX_ISSUE(T, A, B, blk)                                                                                   \
	do {                                                                                                           \
		if (Q4) {                                                                                                  \
			if ((blk) + 2 < nbc) amx_unpack_q4(ring + (((blk) + 2) & 3) * 512, pg + ((blk) + 2) * PB);             \
			_tile_loadd(B, ring + ((blk) & 3) * 512, 64);                                                          \
		} else                                                                                                     \
			_tile_loadd(B, pg + (blk) * PB + 32, 64);                                                              \
		_tile_loadd(A, x + (blk) * 512, 32);                                                                       \
		_tile_zero(T);                                                                                             \
		if (Q4)                                                                                                    \
			_tile_dpbssd(T, A, B);                                                                                 \
		else                                                                                                       \
			_tile_dpbsud(T, A, B);                                                                                 \
	} while (0)

// AMX_POST scales block blk's products, in accumulator T, into acc.
#define AMX_POST(T, blk)                                                                                          \
	do {                                                                                                           \
		_tile_stored(T, C, 64);                                                                                    \
		amx_post(NT, Q4, acc, C, tab, ts, blk, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pg + (blk) * PB)))); \
	} while (0)

// amx_tile multiplies one group (pg: its packed blocks, PB bytes each) by
// one activation tile (x: its block-0 A tile, one every 512 bytes) over nbc
// blocks, two blocks in flight.
DT_INLINE void amx_tile(const int NT, const int Q4, const uint8_t *pg, int rows, int64_t nbc, const uint8_t *x,
                        const q8a *tab, int64_t ts, float *out, int64_t ldo, int add) {
	const int64_t PB = Q4 ? PK_Q4_0 : PK_Q8_0;
	__m512 acc[16];
	int32_t C[256] __attribute__((aligned(64)));
	uint8_t ring[4 * 512] __attribute__((aligned(64)));
	if (Q4) {
		amx_unpack_q4(ring, pg);
		if (nbc > 1) amx_unpack_q4(ring + 512, pg + PB);
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nbc; b += 2) {
		#pragma GCC unroll 18
		for (int k = 0; k < 2 * PB; k += 64) _mm_prefetch((const char *)pg + b * PB + PF_BYTES + k, _MM_HINT_T0);
		AMX_ISSUE(0, 4, 6, b);
		if (b + 1 < nbc) AMX_ISSUE(1, 5, 7, b + 1);
		AMX_POST(0, b);
		if (b + 1 < nbc) AMX_POST(1, b + 1);
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], add);
}

typedef void (*amx_fn)(const uint8_t *pg, int rows, int64_t nbc, const uint8_t *x, const q8a *tab, int64_t ts,
                       float *out, int64_t ldo, int add);

#define AMX_FN(name, NT)                                                                                          \
	static void name##_##NT(const uint8_t *pg, int rows, int64_t nbc, const uint8_t *x, const q8a *tab, int64_t ts, \
	                        float *out, int64_t ldo, int add) {                                                   \
		amx_tile(NT, name##_q4, pg, rows, nbc, x, tab, ts, out, ldo, add);                                       \
	}
#define AMX_FNS(name) NT_VARIANTS(AMX_FN, amx_fn, name, name##_fns)

// name##_q4 tells AMX_FN which kernel name is.
enum { amx_q8_0_q4 = 0, amx_q4_0_q4 = 1 };
AMX_FNS(amx_q8_0)
AMX_FNS(amx_q4_0)

#pragma GCC pop_options

#endif

#if defined(PK_LEVEL)

// A product runs chunk by chunk of activation rows (up to PK_JC of them):
// pk_prep fills a chunk's activation table and lays out its quants for
// every block of the row (and AMX's A tiles), which every thread then
// reads in pk_groups. So the C
// thread pool prepares a chunk once however many pieces it cuts the weight
// rows into. Each group then multiplies its blocks in pieces of PK_KC,
// each piece's sum added into out (the float steps every n takes), one
// piece after the other: the group's weights stream from memory in one
// run. (Taking the first PK_KC blocks of every group before the rest
// read a 5632-wide matrix at 26 GB/s where narrower ones streamed at 36:
// docs/measurements/kernels-products.md, "Wide matrices in one run".)
//
// PK_TAB entries bound a chunk's table: rows of more than PK_TAB/PK_JC
// blocks come in chunks of fewer rows (whole activation tiles, for AMX,
// up to rows of PK_TAB/16 blocks), which changes nothing in the sums.
//
// A chunk's scratch holds its table and its activations' quants laid out
// for the tiles: tile by tile (PK_NT rows, the last fewer), in a tile
// block after block, and in a block the tile's rows one after another
// (32 bytes of quants, or one table entry, a row). With AMX it also holds
// AMX's own: the table row by row, and the A tiles (per activation tile
// of 16 rows, zeros past the last, and block: 512 bytes).
#define PK_TAB ((int64_t)PK_JC * 512)
#define PK_TAB_BYTES ((size_t)PK_TAB * sizeof(q8a))
#define PK_PAD_BYTES ((size_t)PK_TAB * 32)
#define PK_TILES_BYTES (PK_TAB_BYTES + PK_PAD_BYTES)

#if defined(DT_AVX512)
size_t pk_scratch_bytes(void) { return 2 * PK_TILES_BYTES; }
#else
size_t pk_scratch_bytes(void) { return PK_TILES_BYTES; }
#endif

// pk_rows is the activation rows of a chunk.
static int64_t pk_rows(const pk_args *a) {
	const int64_t nb = a->cols / QK;
	int64_t jc = PK_TAB / nb;
	if (jc > PK_JC) jc = PK_JC;
	if (jc >= 16) jc -= jc % 16;
	return jc < 1 ? 1 : jc;
}

int64_t pk_chunks(const pk_args *a) {
	const int64_t jc = pk_rows(a);
	return (a->n + jc - 1) / jc;
}

// pk_chunk gives chunk c's activation rows [jb, jb+jn).
static void pk_chunk(const pk_args *a, int64_t c, int64_t *jb, int64_t *jn) {
	const int64_t jc = pk_rows(a);
	*jb = c * jc;
	*jn = a->n - *jb < jc ? a->n - *jb : jc;
}

#if defined(DT_AVX512)
// pk_amx tells whether a product's activation tiles of AMX_MIN_ROWS rows
// or more go to AMX (AVX-512 code): its A tiles need chunks of whole tiles.
static int pk_amx(const pk_args *a) {
	return a->amx && (a->type == PK_TYPE_Q8_0 || a->type == PK_TYPE_Q4_0) && a->n >= AMX_MIN_ROWS && pk_rows(a) >= 16;
}
#endif

void pk_prep(const pk_args *a, int64_t c, void *scratch) {
	int64_t jb, jn;
	pk_chunk(a, c, &jb, &jn);
	const int64_t nb = a->cols / QK;
	const pk_kind *kind = pk_kind_of(a->type);
	q8a *tab = scratch;
	uint8_t *pad = (uint8_t *)scratch + PK_TAB_BYTES;
	for (int64_t j0 = 0; j0 < jn; j0 += PK_NT) {
		const int64_t nt = jn - j0 < PK_NT ? jn - j0 : PK_NT;
		const uint8_t *x = a->act + (jb + j0) * a->arb;
		q8a_prep(tab + j0 * nb, 1, nt, x, a->arb, nt, 0, nb, kind->off, kind->min);
		for (int64_t b = 0; b < nb; b++)
			for (int64_t j = 0; j < nt; j++) memcpy(pad + (j0 * nb + b * nt + j) * QK, x + j * a->arb + b * Q8_0_SIZE + 2, QK);
	}
#if defined(DT_AVX512)
	if (pk_amx(a)) {
		// AMX reads activations laid out as its A tiles: per activation
		// tile and block, 16 rows of 32 bytes (rows past n zero), so that a
		// tile load reads 512 contiguous bytes rather than 16 lines.
		q8a *atab = (q8a *)((uint8_t *)scratch + PK_TILES_BYTES);
		uint8_t *apad = (uint8_t *)scratch + PK_TILES_BYTES + PK_TAB_BYTES;
		q8a_prep(atab, nb, 1, a->act + jb * a->arb, a->arb, jn, 0, nb, kind->off, kind->min);
		memset(apad, 0, (size_t)((jn + 15) / 16 * nb * 512));
		for (int64_t j = 0; j < jn; j++)
			for (int64_t b = 0; b < nb; b++)
				memcpy(apad + ((j / 16) * nb + b) * 512 + (j % 16) * 32, a->act + (jb + j) * a->arb + b * Q8_0_SIZE + 2, 32);
	}
#endif
}


// pk_begin and pk_end bracket a thread's pk_groups calls for one product
// (AMX's tile configuration is per thread).
void pk_begin(const pk_args *a) {
#if defined(DT_AVX512)
	if (pk_amx(a)) amx_begin();
#else
	(void)a;
#endif
}

void pk_end(const pk_args *a) {
#if defined(DT_AVX512)
	if (pk_amx(a)) amx_end();
#else
	(void)a;
#endif
}

// pk_tiles is a type's tiles, indexed by their activation rows.
#if defined(DT_AVX512)
static pk_fn const *pk_tiles(int64_t type) {
	switch (type) {
	case PK_TYPE_Q8_0: return pq8_0_tile_fns;
	case PK_TYPE_Q4_0: return pq4_0_tile_fns;
	case PK_TYPE_IQ4_NL: return pqnl_tile_fns;
	case PK_TYPE_Q4_1: return pq4_1_tile_fns;
	case PK_TYPE_Q5_1: return pq5_1_tile_fns;
	default: return pq5_0_tile_fns;
	}
}
#else
static p2_fn const *pk_tiles(int64_t type) {
	switch (type) {
	case PK_TYPE_Q8_0: return p2_tiles_0;
	case PK_TYPE_Q4_0: return p2_tiles_1;
	case PK_TYPE_IQ4_NL: return p2_tiles_3;
	case PK_TYPE_Q4_1: return p2_tiles_4;
	case PK_TYPE_Q5_1: return p2_tiles_5;
	default: return p2_tiles_2;
	}
}
#endif

// pk_groups runs row groups [glo, ghi) of chunk c, prepared in scratch.
void pk_groups(const pk_args *a, int64_t c, const void *scratch, int64_t glo, int64_t ghi) {
	int64_t jb, jn;
	pk_chunk(a, c, &jb, &jn);
	const int64_t PB = pk_kind_of(a->type)->packed, nb = a->cols / QK;
	const q8a *tab = scratch;
	const uint8_t *pad = (const uint8_t *)scratch + PK_TAB_BYTES;
#if defined(DT_AVX512)
	const int use_amx = pk_amx(a);
	pk_fn const *fns = pk_tiles(a->type);
	amx_fn const *amx = a->type == PK_TYPE_Q4_0 ? amx_q4_0_fns : amx_q8_0_fns;
	const q8a *atab = (const q8a *)((const uint8_t *)scratch + PK_TILES_BYTES);
	const uint8_t *apad = (const uint8_t *)scratch + PK_TILES_BYTES + PK_TAB_BYTES;
#else
	p2_fn const *fns = pk_tiles(a->type);
#endif
	for (int64_t g = glo; g < ghi; g++) {
		const int64_t r0 = g * PK_ROWS;
		const int rows_g = a->rows - r0 < PK_ROWS ? (int)(a->rows - r0) : PK_ROWS;
		for (int64_t b0 = 0; b0 < nb; b0 += PK_KC) {
			const int64_t nbc = nb - b0 < PK_KC ? nb - b0 : PK_KC;
			const uint8_t *pg = a->pw + (g * nb + b0) * PB;
			for (int64_t j0 = 0; j0 < jn; j0 += PK_NT) {
				const int nt = jn - j0 < PK_NT ? (int)(jn - j0) : PK_NT;
				float *o = a->out + (jb + j0) * a->ldo + r0;
#if defined(DT_AVX512)
				if (use_amx && nt >= AMX_MIN_ROWS) {
					amx[nt](pg, rows_g, nbc, apad + ((j0 / 16) * nb + b0) * 512, atab + j0 * nb + b0, nb, o, a->ldo, b0 > 0);
					continue;
				}
#endif
				fns[nt](pg, rows_g, b0, nbc, pad + j0 * nb * QK, tab + j0 * nb, o, a->ldo, b0 > 0);
			}
		}
	}
}

// pk_value is value v (0..31) of row i of a packed block pb of a type
// pk_kind_of knows: the weight the tiles multiply, less what they offset
// it by (Q4_1's and Q5_1's q).
static int pk_value(int64_t type, const uint8_t *pb, int i, int v) {
	const pk_kind *k = pk_kind_of(type);
	const uint8_t *vs = pb + 2 * PK_ROWS * k->heads;
	if (type == PK_TYPE_Q8_0) return (int8_t)(vs[4 * PK_ROWS * (v / 4) + 4 * i + v % 4] ^ (PK_Q8_OFF ? 0x80 : 0));
	const uint8_t byte = vs[4 * PK_ROWS * (v % 16 / 4) + 4 * i + v % 4];
	int q = v < 16 ? byte & 15 : byte >> 4;
	if (k->qh) q += (int)(ld32(vs + 16 * PK_ROWS + 4 * i) >> v & 1) << 4;
	if (type == PK_TYPE_IQ4_NL) return dt_iq4_values[q];
	return k->min ? q : q - k->off;
}

// pk_scalar is pk_groups for every chunk at once, value by value, where
// there is no memory for a chunk's scratch: the same integers and float
// steps, so the same bits (the tiles' float steps are lane by lane).
static void pk_scalar(const pk_args *a, int64_t glo, int64_t ghi) {
	const pk_kind *k = pk_kind_of(a->type);
	const int64_t nb = a->cols / QK;
	for (int64_t g = glo; g < ghi; g++) {
		const int rows_g = a->rows - g * PK_ROWS < PK_ROWS ? (int)(a->rows - g * PK_ROWS) : PK_ROWS;
		for (int64_t j = 0; j < a->n; j++)
			for (int i = 0; i < rows_g; i++) {
				float *o = a->out + j * a->ldo + g * PK_ROWS + i;
				for (int64_t b0 = 0; b0 < nb; b0 += PK_KC) {
					float acc = 0;
					for (int64_t b = b0; b < nb && b < b0 + PK_KC; b++) {
						const uint8_t *pb = a->pw + (g * nb + b) * k->packed, *x = a->act + j * a->arb + b * Q8_0_SIZE;
						int32_t s = 0, sum = 0;
						for (int v = 0; v < QK; v++) s += pk_value(a->type, pb, i, v) * (int8_t)x[2 + v], sum += (int8_t)x[2 + v];
						const float d = f16_to_f32(ld16(x));
						acc = fmaf((float)s, f16_to_f32(ld16(pb + 2 * i)) * d, acc);
						if (k->min) acc = fmaf(f16_to_f32(ld16(pb + 2 * PK_ROWS + 2 * i)), d * (float)sum, acc);
					}
					*o = b0 > 0 ? acc + *o : acc;
				}
			}
	}
}

// pk_scratchless: the tests take pk_scalar as if no scratch could be had.
static int pk_scratchless;

// pk_matmul runs row groups [glo, ghi) of a product on this thread.
static void pk_matmul(const pk_args *a, int64_t glo, int64_t ghi) {
	static __thread uint8_t *scratch;
	if (!scratch) scratch = aligned_alloc(64, pk_scratch_bytes());
	if (!scratch || pk_scratchless) {
		pk_scalar(a, glo, ghi);
		return;
	}
	pk_begin(a);
	for (int64_t c = 0; c < pk_chunks(a); c++) {
		pk_prep(a, c, scratch);
		pk_groups(a, c, scratch, glo, ghi);
	}
	pk_end(a);
}

#endif

#if !defined(PK_LEVEL)
// Other levels pack nothing (dt_pack_rows is 0), so the pool never runs a
// packed product there.
size_t pk_scratch_bytes(void) { return 0; }
int64_t pk_chunks(const pk_args *a) { (void)a; return 0; }
void pk_prep(const pk_args *a, int64_t chunk, void *scratch) { (void)a, (void)chunk, (void)scratch; }
void pk_begin(const pk_args *a) { (void)a; }
void pk_end(const pk_args *a) { (void)a; }
void pk_groups(const pk_args *a, int64_t chunk, const void *scratch, int64_t glo, int64_t ghi) {
	(void)a, (void)chunk, (void)scratch, (void)glo, (void)ghi;
}
#endif

// dt_amx_init asks Linux for the AMX tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA), which a process must do before its
// first tile instruction, and returns 1 if it was granted.
DT_API int64_t dt_amx_init(void) {
#if defined(DT_AVX512) && defined(__linux__)
	return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
	return 0;
#endif
}

// pk_run runs a whole product on this thread (the C pool's way out when
// it has no memory for a shared preparation).
void pk_run(const pk_args *a) {
#if defined(PK_LEVEL)
	pk_matmul(a, 0, (a->rows + PK_ROWS - 1) / PK_ROWS);
#else
	(void)a;
#endif
}

// The entry points, one pack and one product a type: dt_matmul_packed_X
// is dt_matmul_X over packed weights, for weight rows [lo, hi) (lo a
// multiple of the level's group, hi a multiple of it or rows). amx (only
// after dt_amx_init returned 1) multiplies Q8_0's and Q4_0's activation
// tiles of at least AMX_MIN_ROWS rows with AMX. A level that does not
// pack (dt_pack_rows 0) never calls them.
#if defined(PK_LEVEL)
#define PK_ENTRIES(name, TYPE)                                                                                  \
	DT_API void dt_pack_##name(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {         \
		pk_pack(TYPE, dst, w, rb, rows, cols);                                                                   \
	}                                                                                                            \
	DT_API void dt_matmul_packed_##name(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo,     \
	                                    int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols,    \
	                                    int64_t amx) {                                                           \
		const pk_args a = {TYPE, out, ldo, pw, rows, act, arb, n, cols, amx};                                    \
		pk_matmul(&a, lo / PK_ROWS, (hi + PK_ROWS - 1) / PK_ROWS);                                               \
	}
#else
#define PK_ENTRIES(name, TYPE)                                                                                  \
	DT_API void dt_pack_##name(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {         \
		(void)dst, (void)w, (void)rb, (void)rows, (void)cols;                                                    \
	}                                                                                                            \
	DT_API void dt_matmul_packed_##name(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo,     \
	                                    int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols,    \
	                                    int64_t amx) {                                                           \
		(void)out, (void)ldo, (void)pw, (void)rows, (void)lo, (void)hi, (void)act, (void)arb, (void)n,           \
		    (void)cols, (void)amx;                                                                               \
	}
#endif
PK_ENTRIES(q8_0, PK_TYPE_Q8_0)
PK_ENTRIES(q4_0, PK_TYPE_Q4_0)
PK_ENTRIES(q5_0, PK_TYPE_Q5_0)
PK_ENTRIES(iq4_nl, PK_TYPE_IQ4_NL)
PK_ENTRIES(q4_1, PK_TYPE_Q4_1)
PK_ENTRIES(q5_1, PK_TYPE_Q5_1)

// dt_packed_scratchless makes this level's single-thread packed products
// of the types over Q8_0 activations take their path for when no scratch
// memory can be had (on != 0), for the tests.
DT_API void dt_packed_scratchless(int64_t on) {
#if defined(PK_LEVEL)
	pk_scratchless = on != 0;
#else
	(void)on;
#endif
}
