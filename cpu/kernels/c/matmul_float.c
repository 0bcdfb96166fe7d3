// F16, BF16 and F32 weights × activations of the same type. The products
// of widened f16/bf16 values are exact in float32; only the order of the
// float32 sums differs from the Go reference (which sums in float64).
//
// A tile is RT weight rows × NT activation rows, SIMD lanes along the
// columns: each loaded and widened weight vector meets NT activation
// vectors, each activation vector RT weight vectors, and the RT×NT sums are
// reduced horizontally once per tile.
//
// A tile's RT rows are RT short streams (a row of a small model is a few
// KB), which the hardware prefetchers barely start on before the tile
// ends: each tile asks for the same columns of the next tile's rows as it
// reads its own (docs/measurements/kernels-products.md, "F16 weights").
#include "common.h"
#include "widen.h"

enum { KF16, KBF16, KF32 };

#if defined(DT_AVX512)

DT_INLINE __m512 ld16f(const int kind, const uint8_t *p, __mmask16 m) {
	switch (kind) {
	case KF16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
	case KBF16: return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
	default: return _mm512_maskz_loadu_ps(m, p);
	}
}

DT_INLINE void float_tile(const int kind, const int xkind, const int RT, const int NT, float *out, int64_t ldo,
                          const uint8_t *w, int64_t rb, const uint8_t *act, int64_t arb, int64_t cols) {
	const int es = kind == KF32 ? 4 : 2, xs = xkind == KF32 ? 4 : 2;
	__m512 acc[4][4];
	#pragma GCC unroll 16
	for (int r = 0; r < RT; r++)
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) acc[r][j] = _mm512_setzero_ps();
	for (int64_t k = 0; k < cols; k += 16) {
		const __mmask16 m = cols - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - k)) - 1);
		__m512 wv[4], xv[4];
		if ((k * es) % 64 == 0)
			#pragma GCC unroll 4
			for (int r = 0; r < RT; r++) _mm_prefetch((const char *)w + (r + RT) * rb + k * es, _MM_HINT_T0);
		#pragma GCC unroll 16
		for (int r = 0; r < RT; r++) wv[r] = ld16f(kind, w + r * rb + k * es, m);
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) xv[j] = ld16f(xkind, act + j * arb + k * xs, m);
		#pragma GCC unroll 16
		for (int r = 0; r < RT; r++)
			#pragma GCC unroll 16
			for (int j = 0; j < NT; j++) acc[r][j] = _mm512_fmadd_ps(wv[r], xv[j], acc[r][j]);
	}
	#pragma GCC unroll 16
	for (int r = 0; r < RT; r++)
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) out[j * ldo + r] = hsum512(acc[r][j]);
}
#define MAXNT 4

#elif defined(DT_AVX2)

DT_INLINE __m256 ld8f(const int kind, const uint8_t *p) {
	switch (kind) {
	case KF16: return widen8(0, p);
	case KBF16: return widen8(1, p);
	default: return _mm256_loadu_ps((const float *)p);
	}
}

DT_INLINE float ld1f(const int kind, const uint8_t *p) {
	switch (kind) {
	case KF16: return f16_to_f32(ld16(p));
	case KBF16: return bf16_to_f32(ld16(p));
	default: return ldf(p);
	}
}

DT_INLINE void float_tile(const int kind, const int xkind, const int RT, const int NT, float *out, int64_t ldo,
                          const uint8_t *w, int64_t rb, const uint8_t *act, int64_t arb, int64_t cols) {
	const int es = kind == KF32 ? 4 : 2, xs = xkind == KF32 ? 4 : 2;
	__m256 acc[4][2];
	#pragma GCC unroll 16
	for (int r = 0; r < RT; r++)
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) acc[r][j] = _mm256_setzero_ps();
	int64_t k = 0;
	for (; k + 8 <= cols; k += 8) {
		__m256 wv[4], xv[2];
		if ((k * es) % 64 == 0)
			#pragma GCC unroll 4
			for (int r = 0; r < RT; r++) _mm_prefetch((const char *)w + (r + RT) * rb + k * es, _MM_HINT_T0);
		#pragma GCC unroll 16
		for (int r = 0; r < RT; r++) wv[r] = ld8f(kind, w + r * rb + k * es);
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) xv[j] = ld8f(xkind, act + j * arb + k * xs);
		#pragma GCC unroll 16
		for (int r = 0; r < RT; r++)
			#pragma GCC unroll 16
			for (int j = 0; j < NT; j++) acc[r][j] = _mm256_fmadd_ps(wv[r], xv[j], acc[r][j]);
	}
	#pragma GCC unroll 16
	for (int r = 0; r < RT; r++)
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) {
			float s = hsum256(acc[r][j]);
			for (int64_t i = k; i < cols; i++) s += ld1f(kind, w + r * rb + i * es) * ld1f(xkind, act + j * arb + i * xs);
			out[j * ldo + r] = s;
		}
}
#define MAXNT 2

#else

DT_INLINE float ld1f(const int kind, const uint8_t *p) {
	switch (kind) {
	case KF16: return f16_to_f32(ld16(p));
	case KBF16: return bf16_to_f32(ld16(p));
	default: return ldf(p);
	}
}

// Eight partial sums let the compiler vectorize without reassociating.
DT_INLINE void float_tile(const int kind, const int xkind, const int RT, const int NT, float *out, int64_t ldo,
                          const uint8_t *w, int64_t rb, const uint8_t *act, int64_t arb, int64_t cols) {
	const int es = kind == KF32 ? 4 : 2;
	(void)xkind;
	(void)RT;
	(void)NT;
	float s[8] = {0};
	int64_t k = 0;
	for (; k + 8 <= cols; k += 8)
		for (int l = 0; l < 8; l++) s[l] += ld1f(kind, w + (k + l) * es) * ld1f(kind, act + (k + l) * es);
	float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	for (; k < cols; k++) sum += ld1f(kind, w + k * es) * ld1f(kind, act + k * es);
	*out = sum;
	(void)ldo;
	(void)rb;
	(void)arb;
}
#define MAXNT 1

#endif

#if MAXNT == 1
#define RT_FULL 1
#else
#define RT_FULL 4
#endif

// float_matmul walks tiles of RT_FULL rows × MAXNT activation rows; the
// kind, RT and NT are constants in each instantiation so the tile's arrays
// live in registers.
DT_INLINE void float_matmul(const int kind, float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo,
                            int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	int xkind = kind;
#if MAXNT > 1
	if (kind != KF32 && n > 1) {
		int64_t xs;
		const float *x = widen_rows(kind == KBF16, act, arb, n, cols, &xs);
		if (x) xkind = KF32, act = (const uint8_t *)x, arb = xs * 4;
	}
#endif
	int64_t r = lo;
	for (; r < hi; r += RT_FULL) {
		const int full = hi - r >= RT_FULL;
		for (int64_t j = 0; j < n; j += MAXNT) {
			const int nt = n - j < MAXNT ? (int)(n - j) : MAXNT;
			float *o = out + j * ldo + r;
			const uint8_t *a = act + j * arb;
			if (full) {
				switch (nt) {
#if MAXNT >= 4
				case 4: float_tile(kind, xkind, RT_FULL, 4, o, ldo, w + r * rb, rb, a, arb, cols); break;
				case 3: float_tile(kind, xkind, RT_FULL, 3, o, ldo, w + r * rb, rb, a, arb, cols); break;
#endif
#if MAXNT >= 2
				case 2: float_tile(kind, xkind, RT_FULL, 2, o, ldo, w + r * rb, rb, a, arb, cols); break;
#endif
				default: float_tile(kind, xkind, RT_FULL, 1, o, ldo, w + r * rb, rb, a, arb, cols); break;
				}
			} else {
				for (int64_t rr = r; rr < hi; rr++) {
					switch (nt) {
#if MAXNT >= 4
					case 4: float_tile(kind, xkind, 1, 4, o + (rr - r), ldo, w + rr * rb, rb, a, arb, cols); break;
					case 3: float_tile(kind, xkind, 1, 3, o + (rr - r), ldo, w + rr * rb, rb, a, arb, cols); break;
#endif
#if MAXNT >= 2
					case 2: float_tile(kind, xkind, 1, 2, o + (rr - r), ldo, w + rr * rb, rb, a, arb, cols); break;
#endif
					default: float_tile(kind, xkind, 1, 1, o + (rr - r), ldo, w + rr * rb, rb, a, arb, cols); break;
					}
				}
			}
		}
		if (!full) break;
	}
}

DT_API void dt_matmul_f16(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                          const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	float_matmul(KF16, out, ldo, w, rb, lo, hi, act, arb, n, cols);
}

DT_API void dt_matmul_bf16(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	float_matmul(KBF16, out, ldo, w, rb, lo, hi, act, arb, n, cols);
}

DT_API void dt_matmul_f32(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                          const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	float_matmul(KF32, out, ldo, w, rb, lo, hi, act, arb, n, cols);
}
