// F16 and BF16 values widened to float32 (exactly), for the float
// products: eight at a time, and whole activation rows into a buffer of
// the thread's, so that tiles of several activation rows convert only
// their weights (matmul_float.c's rows, packed_float.c's groups).
#ifndef DOVETAIL_WIDEN_H
#define DOVETAIL_WIDEN_H
#include "common.h"
#include <stdlib.h>

#if defined(DT_AVX2)

// widen8 widens 8 values at p: f16, or bf16 for BF.
DT_INLINE __m256 widen8(const int BF, const uint8_t *p) {
	const __m128i h = _mm_loadu_si128((const __m128i *)p);
	return BF ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

// act_rows returns a buffer of the thread's for n rows of cols floats,
// grown as needed (0 if it cannot be), the rows *xs floats apart. Rows
// start on their own lines (a vector that straddled two would be two
// loads) and 16 lines apart modulo the L1 cache's 64 sets, so a tile
// reading a few lines of each of its rows takes disjoint sets, four rows
// to a set at most (rows a multiple of 4 KB apart would all take the same
// ones, rows a line apart would pile up on a diagonal).
__attribute__((unused)) static float *act_rows(int64_t n, int64_t cols, int64_t *xs) {
	static __thread float *buf;
	static __thread int64_t cap;
	*xs = (cols + 1023) / 1024 * 1024 + 256;
	if (n * *xs > cap) {
		float *b = aligned_alloc(64, (size_t)(n * *xs) * sizeof *b);
		if (!b) return 0;
		free(buf);
		buf = b, cap = n * *xs;
	}
	return buf;
}

// widen_rows returns the n activation rows at act (arb bytes apart, f16 or
// bf16 for BF) as float32 in act_rows's buffer, *xs floats apart (0 if it
// cannot be had).
__attribute__((unused)) static float *widen_rows(const int BF, const uint8_t *act, int64_t arb, int64_t n, int64_t cols,
                                                 int64_t *xs) {
	float *buf = act_rows(n, cols, xs);
	if (!buf) return 0;
	for (int64_t j = 0; j < n; j++) {
		const uint8_t *a = act + j * arb;
		float *x = buf + j * *xs;
		int64_t c = 0;
		for (; c + 8 <= cols; c += 8) _mm256_storeu_ps(x + c, widen8(BF, a + 2 * c));
		for (; c < cols; c++) x[c] = BF ? bf16_to_f32(ld16(a + 2 * c)) : f16_to_f32(ld16(a + 2 * c));
	}
	return buf;
}

#endif
#endif
