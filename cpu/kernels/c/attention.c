// Attention of new rows over one layer's f16 KV cache, with llama.cpp's
// non-flash roundings: the query rounded to f16 before the q·k dots, the
// softmax weights rounded to f16 before they weight the values. Rows of a
// token tree see the committed positions and, among the new ones, only the
// rows their mask selects.
#include "common.h"

#define MAX_HD 1024

// ATT_AHEAD is how many positions ahead the keys and values a head reads are
// prefetched. A head reads hd halves of every row of the cache, rows kvdim
// apart: a stride the hardware prefetchers follow too slowly, so at a
// thousand positions decode spent most of its time waiting for them
// (docs/measurements/kernels-attention-threads.md, "Attention over a long
// context").
#define ATT_AHEAD 32

// prefetch_head asks for the hd halves at p (a line each 32).
DT_INLINE void prefetch_head(const uint16_t *p, int64_t hd) {
	for (int64_t d = 0; d < hd; d += 32) __builtin_prefetch(p + d);
}

#if defined(DT_AVX512)
DT_INLINE __mmask16 tailmask(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

DT_INLINE float dot_qk(const float *q, const uint16_t *k, int64_t hd) {
	__m512 acc = _mm512_setzero_ps();
	for (int64_t d = 0; d < hd; d += 16) {
		const __mmask16 m = tailmask(hd - d);
		acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, k + d)), acc);
	}
	return hsum512(acc);
}

// dot_qk4 is dot_qk for the keys of four consecutive positions (k, and
// k+kvdim, ...), each summed in exactly dot_qk's order: four independent
// chains hide the latency of one, which bound the scores' loop, and a score
// does not depend on which function computed it.
DT_INLINE void dot_qk4(float *s, const float *q, const uint16_t *k, int64_t kvdim, int64_t hd, float scale) {
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (int64_t d = 0; d < hd; d += 16) {
		const __mmask16 m = tailmask(hd - d);
		const __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
		a0 = _mm512_fmadd_ps(qv, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, k + d)), a0);
		a1 = _mm512_fmadd_ps(qv, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, k + kvdim + d)), a1);
		a2 = _mm512_fmadd_ps(qv, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, k + 2 * kvdim + d)), a2);
		a3 = _mm512_fmadd_ps(qv, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, k + 3 * kvdim + d)), a3);
	}
	s[0] = hsum512(a0) * scale, s[1] = hsum512(a1) * scale, s[2] = hsum512(a2) * scale, s[3] = hsum512(a3) * scale;
}

DT_INLINE void round_f16(float *dst, const float *x, int64_t k) {
	for (int64_t i = 0; i < k; i += 16) {
		const __mmask16 m = tailmask(k - i);
		__m512 v = _mm512_maskz_loadu_ps(m, x + i);
		_mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
	}
}

// softmax_f16 turns scores (-inf for masked positions) into f16-rounded
// weights; the sum is in double, as the reference's is.
static void softmax_f16(float *s, int64_t T, float mx) {
	double sum = 0;
	const __m512 vmx = _mm512_set1_ps(mx), ninf = _mm512_set1_ps(-INFINITY);
	for (int64_t t = 0; t < T; t += 16) {
		const __mmask16 m = tailmask(T - t);
		__m512 v = _mm512_maskz_loadu_ps(m, s + t);
		__mmask16 live = _mm512_mask_cmp_ps_mask(m, v, ninf, _CMP_NEQ_OQ);
		__m512 e = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(v, vmx)));
		_mm512_mask_storeu_ps(s + t, m, e);
		sum += _mm512_reduce_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(e))) +
		       _mm512_reduce_add_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
	}
	const __m512 inv = _mm512_set1_ps((float)(1 / sum));
	for (int64_t t = 0; t < T; t += 16) {
		const __mmask16 m = tailmask(T - t);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + t), inv);
		_mm512_mask_storeu_ps(s + t, m, _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
	}
}

// weighted_v: out[0:hd] = sum over t of s[t]*v_t, 64 dimensions at a time
// so the partial sums stay in registers while the rows stream by.
static void weighted_v(float *out, const float *s, const uint16_t *v, int64_t T, int64_t kvdim, int64_t hd) {
	for (int64_t d0 = 0; d0 < hd; d0 += 64) {
		__m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
		__mmask16 m[4];
		for (int c = 0; c < 4; c++) m[c] = d0 + 16 * c < hd ? tailmask(hd - d0 - 16 * c) : 0;
		for (int64_t t = 0; t < T; t++) {
			prefetch_head(v + (t + ATT_AHEAD) * kvdim + d0, hd - d0 < 64 ? hd - d0 : 64);
			if (s[t] == 0) continue;
			const __m512 wt = _mm512_set1_ps(s[t]);
			const uint16_t *vt = v + t * kvdim + d0;
			for (int c = 0; c < 4; c++)
				acc[c] = _mm512_fmadd_ps(wt, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m[c], vt + 16 * c)), acc[c]);
		}
		for (int c = 0; c < 4; c++) _mm512_mask_storeu_ps(out + d0 + 16 * c, m[c], acc[c]);
	}
}

#else

DT_INLINE float f16r(float x) {
#if defined(__F16C__)
	return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
	return f16_to_f32_soft(f32_to_f16_soft(x));
#endif
}

DT_INLINE float dot_qk(const float *q, const uint16_t *k, int64_t hd) {
	int64_t d = 0;
	float s = 0;
#if defined(DT_AVX2)
	__m256 acc = _mm256_setzero_ps();
	for (; d + 8 <= hd; d += 8)
		acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + d))), acc);
	s = hsum256(acc);
#endif
	for (; d < hd; d++) s += q[d] * f16_to_f32(k[d]);
	return s;
}

DT_INLINE void round_f16(float *dst, const float *x, int64_t k) {
	for (int64_t i = 0; i < k; i++) dst[i] = f16r(x[i]);
}

// softmax_f16: at AVX2, eight positions at a time with exp256 (as the
// AVX-512 level's with exp512; one expf a position took as long as its
// score), the rest one by one.
static void softmax_f16(float *s, int64_t T, float mx) {
	double sum = 0;
	int64_t t = 0;
#if defined(DT_AVX2)
	const __m256 vmx = _mm256_set1_ps(mx), ninf = _mm256_set1_ps(-INFINITY);
	for (; t + 8 <= T; t += 8) {
		const __m256 v = _mm256_loadu_ps(s + t);
		const __m256 e = _mm256_and_ps(_mm256_cmp_ps(v, ninf, _CMP_NEQ_OQ), exp256(_mm256_sub_ps(v, vmx)));
		_mm256_storeu_ps(s + t, e);
		const __m256d p = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e)), _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
		const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(p), _mm256_extractf128_pd(p, 1));
		sum += _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
	}
#endif
	for (; t < T; t++) {
		float e = s[t] == -INFINITY ? 0 : expf(s[t] - mx);
		s[t] = e;
		sum += e;
	}
	const float inv = (float)(1 / sum);
	t = 0;
#if defined(DT_AVX2)
	for (; t + 8 <= T; t += 8)
		_mm256_storeu_ps(s + t, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(s + t), _mm256_set1_ps(inv)),
		                                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#endif
	for (; t < T; t++) s[t] = f16r(s[t] * inv);
}

static void weighted_v(float *out, const float *s, const uint16_t *v, int64_t T, int64_t kvdim, int64_t hd) {
	for (int64_t d = 0; d < hd; d++) out[d] = 0;
	for (int64_t t = 0; t < T; t++) {
		prefetch_head(v + (t + ATT_AHEAD) * kvdim, hd);
		if (s[t] == 0) continue;
		const float wt = s[t];
		const uint16_t *vt = v + t * kvdim;
		int64_t d = 0;
#if defined(DT_AVX2)
		const __m256 vw = _mm256_set1_ps(wt);
		for (; d + 8 <= hd; d += 8)
			_mm256_storeu_ps(out + d, _mm256_fmadd_ps(vw, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vt + d))),
			                                          _mm256_loadu_ps(out + d)));
#endif
		for (; d < hd; d++) out[d] += wt * f16_to_f32(vt[d]);
	}
}

#endif

// att_row is one row's attention for head h: the reference the batched
// path below must equal bit for bit. s holds past+n floats.
static void att_row(float *out, const float *q, const uint16_t *kc, const uint16_t *vc, int64_t past, int64_t n,
                    const uint8_t *mask, int64_t heads, int64_t group, int64_t kvdim, int64_t hd, float scale,
                    int64_t j, int64_t h, float *s) {
	const int64_t T = past + n;
	float qr[MAX_HD];
	round_f16(qr, q + (j * heads + h) * hd, hd);
	const uint16_t *K = kc + (h / group) * hd, *V = vc + (h / group) * hd;
	float mx = -INFINITY;
	int64_t t0 = 0;
#if defined(DT_AVX512)
	// The committed positions, which every row sees, four at a time.
	for (; t0 + 4 <= past; t0 += 4) {
		for (int i = 0; i < 4; i++) prefetch_head(K + (t0 + ATT_AHEAD + i) * kvdim, hd);
		dot_qk4(s + t0, qr, K + t0 * kvdim, kvdim, hd, scale);
		for (int i = 0; i < 4; i++) mx = s[t0 + i] > mx ? s[t0 + i] : mx;
	}
#endif
	for (int64_t t = t0; t < T; t++) {
		prefetch_head(K + (t + ATT_AHEAD) * kvdim, hd);
		if (t >= past && !mask[j * n + t - past]) {
			s[t] = -INFINITY;
			continue;
		}
		s[t] = dot_qk(qr, K + t * kvdim, hd) * scale;
		mx = s[t] > mx ? s[t] : mx;
	}
	softmax_f16(s, T, mx);
	weighted_v(out + (j * heads + h) * hd, s, V, T, kvdim, hd);
}

// quad_scores_rest finishes att_quad's scores: those of positions t0 on
// (the committed ones the batched loop left, and the new ones each query's
// mask row selects) one by one as att_row scores them, and each query's
// softmax.
DT_INLINE void quad_scores_rest(float *s, int64_t T, int64_t t0, int64_t past, int64_t n, const uint8_t *mask,
                                const int64_t jr[4], float qr[4][MAX_HD], const uint16_t *const K[4], int64_t kvdim,
                                int64_t hd, float scale, float mx[4]) {
	for (int r = 0; r < 4; r++) {
		float *sr = s + r * T;
		for (int64_t t = t0; t < T; t++) {
			if (t >= past && !mask[jr[r] * n + t - past]) {
				sr[t] = -INFINITY;
				continue;
			}
			sr[t] = dot_qk(qr[r], K[r] + t * kvdim, hd) * scale;
			mx[r] = sr[t] > mx[r] ? sr[t] : mx[r];
		}
		softmax_f16(sr, T, mx[r]);
	}
}

#if defined(DT_AVX512)
// hsum16 returns the sums of sixteen vectors, lane 4b+c holding v[4c+b]'s,
// each summed in exactly hsum512's order (halves, then quarters, then the
// pairs (0,2) and (1,3), then those two), so that a score is the same bits
// whichever computed it; sixteen sums cost 15 additions and 30 shuffles
// instead of sixteen reductions of ten instructions each.
DT_INLINE __m512 hsum16(const __m512 v[16]) {
	__m512 w[8], q[4], r[2];
	for (int j = 0; j < 8; j++)
		w[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)),
		                     _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)));
	for (int j = 0; j < 4; j++)
		q[j] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)),
		                     _mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)));
	for (int j = 0; j < 2; j++)
		r[j] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * j], q[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)),
		                     _mm512_shuffle_ps(q[2 * j], q[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)));
	return _mm512_add_ps(_mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)),
	                     _mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)));
}

// hmax128 puts the largest of x's four lanes in lane 0.
DT_INLINE __m128 hmax128(__m128 x) {
	x = _mm_max_ps(x, _mm_movehl_ps(x, x));
	return _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
}

// quad_kv points K and V at the keys and values of att_quad's four queries
// (the KV heads of heads hr) and says whether all four read the same ones.
DT_INLINE int quad_kv(const uint16_t *K[4], const uint16_t *V[4], const uint16_t *kc, const uint16_t *vc,
                      const int64_t hr[4], int64_t group, int64_t hd) {
	for (int r = 0; r < 4; r++) K[r] = kc + (hr[r] / group) * hd, V[r] = vc + (hr[r] / group) * hd;
	return K[0] == K[1] && K[1] == K[2] && K[2] == K[3];
}

// quad_committed scores att_quad's committed positions four at a time
// (four queries by four positions, sixteen independent dots) and returns
// where it stopped. shared (a constant where it is inlined) says the four
// read the same keys, converted from f16 once for the four.
DT_INLINE int64_t quad_committed(float *s, int64_t T, int64_t past, const uint16_t *const Kp[4], int64_t kvdim,
                                 int64_t hd, float scale, float qr[4][MAX_HD], float mx[4], int shared) {
	const uint16_t *const K[4] = {Kp[0], Kp[1], Kp[2], Kp[3]}; // in registers: the stores to s may alias Kp
	int64_t t0 = 0;
	__m512 mxv = _mm512_set1_ps(-INFINITY);
	for (; t0 + 4 <= past; t0 += 4) {
		for (int r = 0; r < (shared ? 1 : 4); r++)
			for (int i = 0; i < 4; i++) prefetch_head(K[r] + (t0 + ATT_AHEAD + i) * kvdim, hd);
		__m512 a[4][4];
		for (int r = 0; r < 4; r++)
			for (int i = 0; i < 4; i++) a[r][i] = _mm512_setzero_ps();
		for (int64_t d = 0; d < hd; d += 16) {
			const __mmask16 m = tailmask(hd - d);
			__m512 kv[4];
			for (int i = 0; shared && i < 4; i++)
				kv[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, K[0] + (t0 + i) * kvdim + d));
			for (int r = 0; r < 4; r++) {
				const __m512 qv = _mm512_maskz_loadu_ps(m, qr[r] + d);
				for (int i = 0; i < 4; i++) {
					if (!shared) kv[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, K[r] + (t0 + i) * kvdim + d));
					a[r][i] = _mm512_fmadd_ps(qv, kv[i], a[r][i]);
				}
			}
		}
		__m512 v[16];
		for (int r = 0; r < 4; r++)
			for (int i = 0; i < 4; i++) v[4 * i + r] = a[r][i];
		const __m512 sc = _mm512_mul_ps(hsum16(v), _mm512_set1_ps(scale)); // lane 4r+i: query r, position i
		for (int r = 0; r < 4; r++) _mm_storeu_ps(s + r * T + t0, _mm512_extractf32x4_ps(sc, r));
		mxv = _mm512_max_ps(mxv, sc);
	}
	for (int r = 0; r < 4; r++) {
		const float m = _mm_cvtss_f32(hmax128(_mm512_extractf32x4_ps(mxv, r)));
		mx[r] = m > mx[r] ? m : mx[r];
	}
	return t0;
}

// quad_values is weighted_v for att_quad's four queries, 64 dimensions a
// pass; a query skips the positions it gives no weight, as weighted_v does.
DT_INLINE void quad_values(float *out, const float *s, int64_t T, const uint16_t *const Vp[4], int64_t kvdim,
                           int64_t hd, int64_t heads, const int64_t jr[4], const int64_t hr[4], int shared) {
	const uint16_t *const V[4] = {Vp[0], Vp[1], Vp[2], Vp[3]}; // in registers: the stores to out may alias Vp
	for (int64_t d0 = 0; d0 < hd; d0 += 64) {
		__m512 acc[4][4];
		__mmask16 m[4];
		for (int c = 0; c < 4; c++) m[c] = d0 + 16 * c < hd ? tailmask(hd - d0 - 16 * c) : 0;
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
		for (int64_t t = 0; t < T; t++) {
			for (int r = 0; r < (shared ? 1 : 4); r++)
				prefetch_head(V[r] + (t + ATT_AHEAD) * kvdim + d0, hd - d0 < 64 ? hd - d0 : 64);
			__m512 v[4];
			for (int c = 0; shared && c < 4; c++)
				v[c] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m[c], V[0] + t * kvdim + d0 + 16 * c));
			for (int r = 0; r < 4; r++) {
				const float w = s[r * T + t];
				if (w == 0) continue;
				const __m512 wt = _mm512_set1_ps(w);
				for (int c = 0; c < 4; c++) {
					if (!shared) v[c] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m[c], V[r] + t * kvdim + d0 + 16 * c));
					acc[r][c] = _mm512_fmadd_ps(wt, v[c], acc[r][c]);
				}
			}
		}
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < 4; c++) _mm512_mask_storeu_ps(out + (jr[r] * heads + hr[r]) * hd + d0 + 16 * c, m[c], acc[r][c]);
	}
}

// att_quad is att_row for four queries at once (row jr[r] of head hr[r]),
// each query's arithmetic in att_row's order. Four rows of a tree's head, or
// four heads of a decode row that share their KV head (grouped-query
// attention), read the same keys and values: converted from f16 once for the
// four, they cost a quarter as much. Four heads of a decode row with KV heads
// of their own (multi-head attention) read neighbouring stretches of every
// cache row: one pass over those rows where a head at a time took four, each
// reading a line or two of a row and waiting on memory for most of its time
// (docs/measurements/kernels-attention-threads.md, "Four heads a pass"). s
// holds 4*(past+n) floats.
#define QUAD_APART 1 // att_quad takes heads with keys and values of their own
static void att_quad(float *out, const float *q, const uint16_t *kc, const uint16_t *vc, int64_t past, int64_t n,
                     const uint8_t *mask, int64_t heads, int64_t group, int64_t kvdim, int64_t hd, float scale,
                     const int64_t jr[4], const int64_t hr[4], float *s) {
	const int64_t T = past + n;
	float qr[4][MAX_HD];
	float mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
	for (int r = 0; r < 4; r++) round_f16(qr[r], q + (jr[r] * heads + hr[r]) * hd, hd);
	const uint16_t *K[4], *V[4];
	const int shared = quad_kv(K, V, kc, vc, hr, group, hd);
	const int64_t t0 = shared ? quad_committed(s, T, past, K, kvdim, hd, scale, qr, mx, 1)
	                          : quad_committed(s, T, past, K, kvdim, hd, scale, qr, mx, 0);
	quad_scores_rest(s, T, t0, past, n, mask, jr, qr, K, kvdim, hd, scale, mx);
	if (shared)
		quad_values(out, s, T, V, kvdim, hd, heads, jr, hr, 1);
	else
		quad_values(out, s, T, V, kvdim, hd, heads, jr, hr, 0);
}
#endif

#if defined(DT_AVX2) && !defined(DT_AVX512)
// att_quad at the AVX2 level: as the AVX-512 one, for four queries that
// read the same keys and values only (QUAD_APART 0: written for both, as
// the AVX-512 one is, its code for shared keys ran 7% slower), each query
// in the AVX2 att_row's order (a dot in one 8-lane sum over the whole
// vectors, then hsum256 and the tail one by one; the weighted values 8
// dimensions at a time, then the tail one by one); the committed keys two
// at a time.
#define QUAD_APART 0
static void att_quad(float *out, const float *q, const uint16_t *kc, const uint16_t *vc, int64_t past, int64_t n,
                     const uint8_t *mask, int64_t heads, int64_t group, int64_t kvdim, int64_t hd, float scale,
                     const int64_t jr[4], const int64_t hr[4], float *s) {
	const int64_t T = past + n, hv = hd / 8 * 8;
	float qr[4][MAX_HD];
	float mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
	for (int r = 0; r < 4; r++) round_f16(qr[r], q + (jr[r] * heads + hr[r]) * hd, hd);
	const uint16_t *K = kc + (hr[0] / group) * hd, *V = vc + (hr[0] / group) * hd;
	int64_t t0 = 0;
	for (; t0 + 2 <= past; t0 += 2) {
		const uint16_t *k = K + t0 * kvdim;
		prefetch_head(k + ATT_AHEAD * kvdim, hd);
		prefetch_head(k + (ATT_AHEAD + 1) * kvdim, hd);
		__m256 a[4][2];
		for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
		for (int64_t d = 0; d < hv; d += 8) {
			const __m256 k0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + d)));
			const __m256 k1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + kvdim + d)));
			for (int r = 0; r < 4; r++) {
				const __m256 qv = _mm256_loadu_ps(qr[r] + d);
				a[r][0] = _mm256_fmadd_ps(qv, k0, a[r][0]);
				a[r][1] = _mm256_fmadd_ps(qv, k1, a[r][1]);
			}
		}
		for (int r = 0; r < 4; r++)
			for (int i = 0; i < 2; i++) {
				float x = hsum256(a[r][i]);
				for (int64_t d = hv; d < hd; d++) x += qr[r][d] * f16_to_f32(k[i * kvdim + d]);
				x = x * scale;
				s[r * T + t0 + i] = x;
				mx[r] = x > mx[r] ? x : mx[r];
			}
	}
	quad_scores_rest(s, T, t0, past, n, mask, jr, qr, (const uint16_t *const[4]){K, K, K, K}, kvdim, hd, scale, mx);
	// The weighted values, 16 dimensions (or the last 8) a pass; a query
	// skips the positions it gives no weight, as weighted_v does.
	for (int64_t d0 = 0; d0 < hv; d0 += 16) {
		const int two = d0 + 16 <= hv;
		__m256 acc[4][2];
		for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
		for (int64_t t = 0; t < T; t++) {
			const uint16_t *vt = V + t * kvdim + d0;
			if (d0 == 0) prefetch_head(V + (t + ATT_AHEAD) * kvdim, hd);
			const __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)vt));
			const __m256 v1 = two ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vt + 8))) : _mm256_setzero_ps();
			for (int r = 0; r < 4; r++) {
				const float w = s[r * T + t];
				if (w == 0) continue;
				const __m256 wt = _mm256_set1_ps(w);
				acc[r][0] = _mm256_fmadd_ps(wt, v0, acc[r][0]);
				acc[r][1] = _mm256_fmadd_ps(wt, v1, acc[r][1]);
			}
		}
		for (int r = 0; r < 4; r++) {
			float *o = out + (jr[r] * heads + hr[r]) * hd + d0;
			_mm256_storeu_ps(o, acc[r][0]);
			if (two) _mm256_storeu_ps(o + 8, acc[r][1]);
		}
	}
	for (int r = 0; r < 4 && hv < hd; r++) {
		float *o = out + (jr[r] * heads + hr[r]) * hd;
		for (int64_t d = hv; d < hd; d++) o[d] = 0;
		for (int64_t t = 0; t < T; t++) {
			const float w = s[r * T + t];
			if (w == 0) continue;
			for (int64_t d = hv; d < hd; d++) o[d] += w * f16_to_f32(V[t * kvdim + d]);
		}
	}
}
#endif

// sweep_bytes bounds the keys and values sweep_kv reads before a block's
// heads, 0 for none: set by Go (kernels.attentionSweep) from the CPU's
// vendor and L2 size, so that the stretch is still in L2 when the heads
// read it. A larger stretch is read by the heads alone, with their
// prefetches.
static int64_t sweep_bytes;

DT_API void dt_attention_sweep(int64_t bytes) { sweep_bytes = bytes; }

// sweep_kv loads a line of every 64 bytes of columns [c0, c1) of rows [0,
// rows) of the keys and the values, in address order. A decode step comes
// to a layer's cache after the weights it streamed have evicted it, and
// the heads' own reads, a stretch of every row a pass, brought it back
// more slowly than a sweep in order (which the hardware prefetchers
// follow) before them, on an AMD Zen 5; software prefetches of the same
// lines did not. On an Intel Xeon the sweep made attention slower
// (docs/measurements/kernels-attention-threads.md, "Sweeping the KV cache").
static void sweep_kv(const uint16_t *kc, const uint16_t *vc, int64_t rows, int64_t kvdim, int64_t c0, int64_t c1) {
	uint32_t acc = 0;
	for (int64_t t = 0; t < rows; t++)
		for (int64_t c = c0; c < c1; c += 32) acc += kc[t * kvdim + c] + vc[t * kvdim + c];
	__asm__ volatile("" ::"r"(acc));
}

// dt_attention_block is dt_attention for rows [jlo, jhi) and heads [hlo,
// hhi) only, so that the pool can cut a tree (by rows) or one decode row
// (by heads) into pieces. s holds DT_ATT_ROWS*(past+n) floats.
DT_API void dt_attention_block(float *out, const float *q, const uint16_t *kc, const uint16_t *vc, int64_t past,
                               int64_t n, const uint8_t *mask, int64_t heads, int64_t kvheads, int64_t hd,
                               uint32_t scale_bits, int64_t jlo, int64_t jhi, int64_t hlo, int64_t hhi, float *s) {
	const float scale = bitsf(scale_bits);
	const int64_t group = heads / kvheads, kvdim = kvheads * hd;
	int64_t jq = jlo; // rows from jq on go alone, or by heads
	const int64_t c0 = hlo / group * hd, c1 = ((hhi - 1) / group + 1) * hd;
	if (sweep_bytes && jhi > jlo && hhi > hlo && (past + n) * (c1 - c0) * 4 <= sweep_bytes) sweep_kv(kc, vc, past + n, kvdim, c0, c1);
#if defined(DT_AVX2)
	jq = jlo + (jhi - jlo) / 4 * 4;
	for (int64_t h = hlo; h < hhi; h++)
		for (int64_t j = jlo; j < jq; j += 4) {
			const int64_t jr[4] = {j, j + 1, j + 2, j + 3}, hr[4] = {h, h, h, h};
			att_quad(out, q, kc, vc, past, n, mask, heads, group, kvdim, hd, scale, jr, hr, s);
		}
#endif
	for (int64_t j = jq; j < jhi; j++)
		for (int64_t h = hlo; h < hhi;) {
#if defined(DT_AVX2)
			if (h + 4 <= hhi && (QUAD_APART || h / group == (h + 3) / group)) {
				const int64_t jr[4] = {j, j, j, j}, hr[4] = {h, h + 1, h + 2, h + 3};
				att_quad(out, q, kc, vc, past, n, mask, heads, group, kvdim, hd, scale, jr, hr, s);
				h += 4;
				continue;
			}
#endif
			att_row(out, q, kc, vc, past, n, mask, heads, group, kvdim, hd, scale, j, h, s);
			h++;
		}
}

DT_API void dt_attention(float *out, const float *q, const uint16_t *kc, const uint16_t *vc, int64_t past, int64_t n,
                         const uint8_t *mask, int64_t heads, int64_t kvheads, int64_t hd, uint32_t scale_bits,
                         int64_t jlo, int64_t jhi, float *s) {
	dt_attention_block(out, q, kc, vc, past, n, mask, heads, kvheads, hd, scale_bits, jlo, jhi, 0, heads, s);
}
