// Packed F16 and BF16 weights: rows in the level's groups (16 at AVX-512,
// 8 at AVX2, the last padded with zero rows), each group's blocks of 16
// columns one after another, a block the group's rows one after another:
//
//	block k: row 0's values 16k..16k+15, row 1's, ... (32 bytes a row)
//
// the file's bytes in another order. A product streams one run of memory
// a group, as the quantized types' packed products do (a small model's
// rows in the GGUF layout were streams too short for the hardware
// prefetchers).
//
// A row's sum is kept in 16 lanes, lane l summing columns 16k+l with one
// FMA chain over the blocks in order, then reduced in a fixed tree
// (pf_reduce): the arithmetic of the row kernels' AVX-512 tiles, so the
// results are as close to llama.cpp's. AVX2 keeps the 16 lanes in two ymm
// and reduces them in the same tree, so both levels give the same bits,
// for any number of activation rows: a tree's verification scores each
// node bit for bit as decoding it alone does. Decoding (one activation
// row) takes a group's rows at once, their chains overlapping; several
// activation rows go in tiles of PF_RT weight rows by up to PF_NT
// activation rows, a piece of PF_KC blocks at a time for the whole group,
// so that a piece of the activations stays in L1. The activations come
// widened to float32 (widen.h).
#include "common.h"
#include "widen.h"

// PF_RT weight rows and up to PF_NT activation rows make a tile.
#if defined(DT_AVX512)
#define PF_ROWS 16
#define PF_RT 4
#define PF_NT 6
#elif defined(DT_AVX2)
#define PF_ROWS 8
#define PF_RT 1
#define PF_NT 6
#endif
#define PF_LANES (PF_NT * 16) // floats of a weight row's lanes against a tile's activation rows
#define PF_BLOCK (PF_ROWS * 32) // bytes of one block of a group
#define PF_AHEAD 2048           // bytes of a group's stream prefetched ahead
#define PF_KC 16                // blocks a piece (a tile's activation rows: 6 KB)

#if defined(PF_ROWS)

// pf_pack packs rows [0, rows) of an F16 or BF16 matrix (rb bytes apart,
// cols a multiple of 16).
static void pf_pack(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {
	const int64_t groups = (rows + PF_ROWS - 1) / PF_ROWS, nk = cols / 16;
	for (int64_t g = 0; g < groups; g++)
		for (int64_t k = 0; k < nk; k++) {
			uint8_t *d = dst + (g * nk + k) * PF_BLOCK;
			for (int i = 0; i < PF_ROWS; i++) {
				const int64_t r = g * PF_ROWS + i;
				if (r < rows)
					memcpy(d + 32 * i, w + r * rb + 32 * k, 32);
				else
					memset(d + 32 * i, 0, 32);
			}
		}
}



// pf_reduce sums lanes 0..7 and 8..15 of a row's 16 (lo, hi) in the
// tree both levels take.
DT_INLINE float pf_reduce(__m256 lo, __m256 hi) {
	const __m256 v8 = _mm256_add_ps(lo, hi);
	const __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
	const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
	return _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
}

#if defined(DT_AVX512)

// A row's 16 lanes: one zmm.
DT_INLINE __m512 pf_load(const int BF, const uint8_t *p) {
	const __m256i h = _mm256_loadu_si256((const __m256i *)p);
	return BF ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

DT_INLINE float pf_sum(__m512 v) { return pf_reduce(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }

// pf_rows is one activation row x against a group's rows (pg, nk blocks).
DT_INLINE void pf_rows(const int BF, const uint8_t *pg, int rows, int64_t nk, const float *x, float *out) {
	__m512 acc[PF_ROWS];
	#pragma GCC unroll 16
	for (int i = 0; i < PF_ROWS; i++) acc[i] = _mm512_setzero_ps();
	for (int64_t k = 0; k < nk; k++) {
		const uint8_t *pb = pg + k * PF_BLOCK;
		#pragma GCC unroll 8
		for (int l = 0; l < PF_BLOCK; l += 64) _mm_prefetch((const char *)pb + PF_AHEAD + l, _MM_HINT_T0);
		const __m512 xv = _mm512_loadu_ps(x + 16 * k);
		#pragma GCC unroll 16
		for (int i = 0; i < PF_ROWS; i++) acc[i] = _mm512_fmadd_ps(pf_load(BF, pb + 32 * i), xv, acc[i]);
	}
	for (int i = 0; i < rows; i++) out[i] = pf_sum(acc[i]);
}

// pf_tile continues weight rows i..i+PF_RT-1 of a group against NT
// activation rows (x, xs floats apart) over blocks [k0, k1): row i+t's 16
// lanes against activation row j in lanes[(i+t)*PF_LANES + 16*j], from 0
// when first. Four weight rows and up to six activation rows keep both in
// registers: 10 loads for 24 FMAs.
DT_INLINE void pf_tile(const int NT, const int BF, const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x,
                       int64_t xs, float *lanes, int first) {
	__m512 acc[PF_RT][PF_NT];
	#pragma GCC unroll 4
	for (int t = 0; t < PF_RT; t++)
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++)
			acc[t][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (i + t) * PF_LANES + 16 * j);
	for (int64_t k = k0; k < k1; k++) {
		__m512 w[PF_RT];
		#pragma GCC unroll 4
		for (int t = 0; t < PF_RT; t++) w[t] = pf_load(BF, pg + k * PF_BLOCK + 32 * (i + t));
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++) {
			const __m512 xv = _mm512_load_ps(x + j * xs + 16 * k);
			#pragma GCC unroll 4
			for (int t = 0; t < PF_RT; t++) acc[t][j] = _mm512_fmadd_ps(w[t], xv, acc[t][j]);
		}
	}
	#pragma GCC unroll 4
	for (int t = 0; t < PF_RT; t++)
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++) _mm512_storeu_ps(lanes + (i + t) * PF_LANES + 16 * j, acc[t][j]);
}

#else

// A row's 16 lanes: two ymm, lo (columns 16k..16k+7) and hi.
DT_INLINE void pf_rows(const int BF, const uint8_t *pg, int rows, int64_t nk, const float *x, float *out) {
	__m256 lo[PF_ROWS], hi[PF_ROWS];
	#pragma GCC unroll 8
	for (int i = 0; i < PF_ROWS; i++) lo[i] = hi[i] = _mm256_setzero_ps();
	for (int64_t k = 0; k < nk; k++) {
		const uint8_t *pb = pg + k * PF_BLOCK;
		#pragma GCC unroll 4
		for (int l = 0; l < PF_BLOCK; l += 64) _mm_prefetch((const char *)pb + PF_AHEAD + l, _MM_HINT_T0);
		const __m256 x0 = _mm256_loadu_ps(x + 16 * k), x1 = _mm256_loadu_ps(x + 16 * k + 8);
		#pragma GCC unroll 8
		for (int i = 0; i < PF_ROWS; i++) {
			lo[i] = _mm256_fmadd_ps(widen8(BF, pb + 32 * i), x0, lo[i]);
			hi[i] = _mm256_fmadd_ps(widen8(BF, pb + 32 * i + 16), x1, hi[i]);
		}
	}
	for (int i = 0; i < rows; i++) out[i] = pf_reduce(lo[i], hi[i]);
}

DT_INLINE void pf_tile(const int NT, const int BF, const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x,
                       int64_t xs, float *lanes, int first) {
	__m256 lo[PF_NT], hi[PF_NT];
	#pragma GCC unroll 8
	for (int j = 0; j < NT; j++) {
		lo[j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(lanes + i * PF_LANES + 16 * j);
		hi[j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(lanes + i * PF_LANES + 16 * j + 8);
	}
	for (int64_t k = k0; k < k1; k++) {
		const uint8_t *p = pg + k * PF_BLOCK + 32 * i;
		const __m256 w0 = widen8(BF, p), w1 = widen8(BF, p + 16);
		#pragma GCC unroll 8
		for (int j = 0; j < NT; j++) {
			lo[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + j * xs + 16 * k), lo[j]);
			hi[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + j * xs + 16 * k + 8), hi[j]);
		}
	}
	#pragma GCC unroll 8
	for (int j = 0; j < NT; j++)
		_mm256_storeu_ps(lanes + i * PF_LANES + 16 * j, lo[j]), _mm256_storeu_ps(lanes + i * PF_LANES + 16 * j + 8, hi[j]);
}

#endif

typedef void (*pf_fn)(const int BF, const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x, int64_t xs,
                      float *lanes, int first);
#define PF_FN(NT)                                                                                              \
	static void pf_tile_##NT(const int BF, const uint8_t *pg, int i, int64_t k0, int64_t k1, const float *x,    \
	                         int64_t xs, float *lanes, int first) {                                            \
		if (BF)                                                                                                 \
			pf_tile(NT, 1, pg, i, k0, k1, x, xs, lanes, first);                                                 \
		else                                                                                                    \
			pf_tile(NT, 0, pg, i, k0, k1, x, xs, lanes, first);                                                 \
	}
PF_FN(1) PF_FN(2) PF_FN(3) PF_FN(4) PF_FN(5) PF_FN(6)
static pf_fn const pf_tiles[PF_NT + 1] = {0, pf_tile_1, pf_tile_2, pf_tile_3, pf_tile_4, pf_tile_5, pf_tile_6};

// pf_matmul runs the groups holding rows [lo, hi) (lo a multiple of the
// group) against n activation rows.
static void pf_matmul(const int BF, float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                      const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	const int64_t nk = cols / 16, g1 = (hi + PF_ROWS - 1) / PF_ROWS;
	float lanes[PF_ROWS * PF_LANES]; // each row's lanes against each activation row
	int64_t xs;
	const float *x = widen_rows(BF, act, arb, n, cols, &xs);
	if (!x) {
		// No memory for the widened rows: value by value, the rows'
		// sums in the same lanes, chains and tree.
		for (int64_t j = 0; j < n; j++)
			for (int64_t r = lo; r < hi; r++) {
				const uint8_t *pg = pw + (r / PF_ROWS) * nk * PF_BLOCK + (r % PF_ROWS) * 32;
				float lane[16] = {0};
				for (int64_t k = 0; k < nk; k++)
					for (int l = 0; l < 16; l++) {
						const uint16_t hw = ld16(pg + k * PF_BLOCK + 2 * l), hx = ld16(act + j * arb + 2 * (16 * k + l));
						lane[l] = fmaf(BF ? bf16_to_f32(hw) : f16_to_f32(hw), BF ? bf16_to_f32(hx) : f16_to_f32(hx), lane[l]);
					}
				out[j * ldo + r] = pf_reduce(_mm256_loadu_ps(lane), _mm256_loadu_ps(lane + 8));
			}
		return;
	}
	for (int64_t g = lo / PF_ROWS; g < g1; g++) {
		const uint8_t *pg = pw + g * nk * PF_BLOCK;
		const int r = rows - g * PF_ROWS < PF_ROWS ? (int)(rows - g * PF_ROWS) : PF_ROWS;
		if (n == 1) {
			if (BF)
				pf_rows(1, pg, r, nk, x, out + g * PF_ROWS);
			else
				pf_rows(0, pg, r, nk, x, out + g * PF_ROWS);
			continue;
		}
		// Blocks in pieces of PF_KC, every row of the group through a
		// piece before the next, the lanes kept between: a piece of the
		// activations stays in L1 for all of them.
		for (int64_t j0 = 0; j0 < n; j0 += PF_NT) {
			const int nt = n - j0 < PF_NT ? (int)(n - j0) : PF_NT;
			for (int64_t k0 = 0; k0 < nk; k0 += PF_KC)
				for (int i = 0; i < PF_ROWS; i += PF_RT) {
					// The next piece (or group) in parts, a tile's pass
					// each: the piece is read a few rows at a time, 32
					// bytes a row every block, which no prefetcher follows.
					const int part = PF_KC * PF_BLOCK * PF_RT / PF_ROWS;
					const char *next = (const char *)pg + (k0 + PF_KC) * PF_BLOCK + i / PF_RT * part;
					for (int l = 0; l < part; l += 64) _mm_prefetch(next + l, _MM_HINT_T0);
					// Rows past the last (zeros in a partial group) are
					// computed and not stored.
					pf_tiles[nt](BF, pg, i, k0, k0 + PF_KC < nk ? k0 + PF_KC : nk, x + j0 * xs, xs, lanes, k0 == 0);
				}
			for (int i = 0; i < r; i++)
				for (int j = 0; j < nt; j++) {
					const float *l = lanes + i * PF_LANES + 16 * j;
					out[(j0 + j) * ldo + g * PF_ROWS + i] = pf_reduce(_mm256_loadu_ps(l), _mm256_loadu_ps(l + 8));
				}
		}
	}
}

#endif

DT_API void dt_pack_f16(uint8_t *dst, const uint8_t *w, int64_t rb, int64_t rows, int64_t cols) {
#if defined(PF_ROWS)
	pf_pack(dst, w, rb, rows, cols);
#else
	(void)dst, (void)w, (void)rb, (void)rows, (void)cols;
#endif
}

// dt_matmul_packed_f16 is dt_matmul_f16 over packed weights, for weight
// rows [lo, hi) (lo a multiple of the level's group); amx is unused.
DT_API void dt_matmul_packed_f16(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                                 const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t amx) {
	(void)amx;
#if defined(PF_ROWS)
	pf_matmul(0, out, ldo, pw, rows, lo, hi, act, arb, n, cols);
#else
	(void)out, (void)ldo, (void)pw, (void)rows, (void)lo, (void)hi, (void)act, (void)arb, (void)n, (void)cols;
#endif
}

DT_API void dt_matmul_packed_bf16(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                                  const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t amx) {
	(void)amx;
#if defined(PF_ROWS)
	pf_matmul(1, out, ldo, pw, rows, lo, hi, act, arb, n, cols);
#else
	(void)out, (void)ldo, (void)pw, (void)rows, (void)lo, (void)hi, (void)act, (void)arb, (void)n, (void)cols;
#endif
}
