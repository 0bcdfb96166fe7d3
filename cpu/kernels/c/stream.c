// A read of memory at the rate this level's loads stream it: what decoding
// does to the weights, and so the bandwidth its roofline is taken from.
#include "common.h"

// dt_stream_read sums the 64-bit words of p[0:n) (n a multiple of 64) with
// wrapping additions, in independent sums so that no add waits for the one
// before; the sum, the same at every level, only keeps the loads from
// being dropped.
DT_API uint64_t dt_stream_read(const uint8_t *p, int64_t n) {
#if defined(DT_AVX512)
	__m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
	int64_t i = 0;
	for (; i + 256 <= n; i += 256) {
		a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
		b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 64));
		c = _mm512_add_epi64(c, _mm512_loadu_si512(p + i + 128));
		d = _mm512_add_epi64(d, _mm512_loadu_si512(p + i + 192));
	}
	for (; i < n; i += 64) a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
	return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
#elif defined(DT_AVX2)
	__m256i a = _mm256_setzero_si256(), b = a;
	for (int64_t i = 0; i < n; i += 64) {
		a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
		b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
	}
	uint64_t w[4];
	_mm256_storeu_si256((__m256i *)w, _mm256_add_epi64(a, b));
	return w[0] + w[1] + w[2] + w[3];
#else
	uint64_t s[8] = {0};
	for (int64_t i = 0; i < n; i += 64) {
		uint64_t w[8];
		memcpy(w, p + i, 64);
		for (int k = 0; k < 8; k++) s[k] += w[k];
	}
	return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
#endif
}
