// Shared definitions of the Dovetail kernels. Every .c file is compiled once
// per ISA level with that level's -march flags; the DT_* macros below pick
// the code paths, so one set of sources gives every library.
//
// Exported functions take only integer-class arguments (floats as their
// bits) because the Go side calls them through purego.SyscallN, which fills
// integer registers only.
#ifndef DOVETAIL_COMMON_H
#define DOVETAIL_COMMON_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

// DT_ABI_VERSION must equal abiVersion in load.go.
#define DT_ABI_VERSION 27

// DT_ATT_ROWS is how many rows attention computes together: its scratch
// holds that many rows of scores (kernels.AttentionRows in Go).
#define DT_ATT_ROWS 4

#define DT_API __attribute__((visibility("default")))
#define DT_INLINE static inline __attribute__((always_inline))

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__F16C__) && defined(__FMA__)
#define DT_AVX512 1
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define DT_AVX2 1
#endif
// DT_AVXVNNI: the AVX2 level with AVX-VNNI's ymm vpdpbusd (Intel's client
// cores since Alder Lake have it without AVX-512): the avxvnni library.
#if defined(DT_AVX2) && defined(__AVXVNNI__) && !defined(DT_AVX512)
#define DT_AVXVNNI 1
#endif
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#define DT_NEON 1
#endif

#define QK 32
#define QKK 256
#define Q8_0_SIZE 34
#define Q4_0_SIZE 18
#define Q4_1_SIZE 20
#define Q5_1_SIZE 24
#define Q2_K_SIZE 84
#define Q3_K_SIZE 110
#define Q4_K_SIZE 144
#define Q5_K_SIZE 176
#define Q6_K_SIZE 210
#define Q8_K_SIZE 292
#define IQ4_NL_SIZE 18
#define IQ4_XS_SIZE 136

// dt_iq4_values is ggml's kvalues_iq4nl, the 16 values IQ4_NL's and
// IQ4_XS's nibbles index.
static const int8_t dt_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// scale_min_k4 unpacks the 6-bit scale and min of sub-block j of Q4_K and
// Q5_K (ggml's get_scale_min_k4).
DT_INLINE void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

#if defined(DT_AVX2)
// iq4_lut is dt_iq4_values as a vpshufb table; iq4_lut_u the values plus
// 128 (v ^ 0x80: unsigned, as vpdpbusd takes them).
DT_INLINE __m128i iq4_lut(void) { return _mm_loadu_si128((const __m128i *)dt_iq4_values); }
DT_INLINE __m128i iq4_lut_u(void) { return _mm_xor_si128(iq4_lut(), _mm_set1_epi8((char)0x80)); }

// k4_scales unpacks a Q4_K or Q5_K super-block's 12 scale bytes at once
// (ggml's utmp shuffle, scale_min_k4's values): sc the 8 scales in
// 16-bit lanes, mins the 8 mins, each twice (a min per 32 values against
// Q8_K's 16-value sums). Taken one by one, the scales cost the AVX2 row
// kernels more than their products.
DT_INLINE void k4_scales(const uint8_t *q, __m128i *sc, __m256i *mins) {
	uint32_t u[4];
	memcpy(u, q, 12);
	const uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
	u[3] = ((u[2] >> 4) & m2) | (((u[1] >> 6) & m3) << 4);
	const uint32_t mins03 = u[1] & m1;
	u[1] = (u[2] & m2) | (((u[0] >> 6) & m3) << 4);
	u[2] = mins03;
	u[0] &= m1;
	const __m256i v = _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
	*sc = _mm256_castsi256_si128(v);
	const __m128i mn = _mm256_extracti128_si256(v, 1);
	*mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn));
}

// i8_pair16 gives the int8 scales 2i and 2i+1 of sc as 8 + 8 16-bit lanes
// (ggml's get_scale_shuffle), for madd over 32 values with a scale per 16.
DT_INLINE __m256i i8_pair16(__m128i sc, int i) {
	return _mm256_cvtepi8_epi16(
	    _mm_shuffle_epi8(sc, _mm_set_epi64x((int64_t)(0x0101010101010101ull * (2 * i + 1)), (int64_t)(0x0101010101010101ull * (2 * i)))));
}

// k4_scale_lanes puts scale s of k4_scales' sc in every 16-bit lane of
// scale[s], for madd.
DT_INLINE void k4_scale_lanes(__m128i sc, __m256i scale[8]) {
	const __m256i v = _mm256_broadcastsi128_si256(sc);
	#pragma GCC unroll 8
	for (int s = 0; s < 8; s++) scale[s] = _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 + 0x0202 * s)));
}
#endif

DT_INLINE uint16_t ld16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
DT_INLINE int32_t ld32(const void *p) { int32_t v; memcpy(&v, p, 4); return v; }
DT_INLINE uint64_t ld64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
DT_INLINE float ldf(const void *p) { float v; memcpy(&v, p, 4); return v; }
DT_INLINE uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
DT_INLINE float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// f16_to_f32_soft is exact for every input (subnormals, infinities, NaN
// payloads), like quant.F16ToF32.
static inline float f16_to_f32_soft(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	if (exp == 0x1f) return bitsf(sign | 0x7f800000 | man << 13);
	if (exp == 0) return bitsf(sign | fbits((float)man * (1.0f / (1 << 24))));
	return bitsf(sign | (exp + 127 - 15) << 23 | man << 13);
}

// f32_to_f16_soft rounds to nearest even exactly as quant.F32ToF16 (and
// ggml's GGML_FP32_TO_FP16): overflow to infinity, NaN to 0x7e00 with the
// input's sign.
static inline uint16_t f32_to_f16_soft(float f) {
	uint32_t b = fbits(f);
	uint16_t sign = (b >> 16) & 0x8000;
	int32_t exp = (b >> 23) & 0xff;
	uint32_t man = b & 0x7fffff;
	if (exp == 0xff) return sign | (man ? 0x7e00 : 0x7c00);
	int32_t e = exp - 127 + 15;
	if (e >= 0x1f) return sign | 0x7c00;
	if (e <= 0) {
		uint32_t s = (uint32_t)(14 - e);
		if (s > 24 || exp == 0) return sign;
		uint32_t m = man | 0x800000, q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
		if (rem > half || (rem == half && (q & 1))) q++;
		return sign | (uint16_t)q;
	}
	uint32_t h = (uint32_t)e << 10 | man >> 13, rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
	return sign | (uint16_t)h;
}

#if defined(__F16C__)
DT_INLINE float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
#elif defined(__aarch64__)
DT_INLINE float f16_to_f32(uint16_t h) {
	__fp16 f;
	memcpy(&f, &h, 2);
	return (float)f;
}
#else
// Without a conversion instruction, a table of all 65536 values (filled
// when the library loads, see quantize.c) beats the bit manipulation.
extern float dt_f16_table[65536];
DT_INLINE float f16_to_f32(uint16_t h) { return dt_f16_table[h]; }
#endif
DT_INLINE float bf16_to_f32(uint16_t h) { return bitsf((uint32_t)h << 16); }

// Float accumulation order: every kernel sums its float32 terms in its own
// order (SIMD lanes, FMA). The integer parts of the quantized dot products
// are exact, so levels differ only by float32 rounding; see the tests.

#if defined(DT_NEON)
// neon_f16x4 widens the f16 at p0..p3 to four floats.
DT_INLINE float32x4_t neon_f16x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3) {
	uint16x4_t h = vdup_n_u16(ld16(p0));
	h = vset_lane_u16(ld16(p1), h, 1);
	h = vset_lane_u16(ld16(p2), h, 2);
	h = vset_lane_u16(ld16(p3), h, 3);
	return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

// neon_transpose4 turns four rows of four 4-byte groups into four vectors
// of one group from each row (lane i = row i), the layout vdotq_laneq_s32
// multiplies against a broadcast group of activations.
DT_INLINE void neon_transpose4(int8x16_t r0, int8x16_t r1, int8x16_t r2, int8x16_t r3, int8x16_t g[4]) {
	int32x4_t t0 = vtrn1q_s32(vreinterpretq_s32_s8(r0), vreinterpretq_s32_s8(r1));
	int32x4_t t1 = vtrn2q_s32(vreinterpretq_s32_s8(r0), vreinterpretq_s32_s8(r1));
	int32x4_t t2 = vtrn1q_s32(vreinterpretq_s32_s8(r2), vreinterpretq_s32_s8(r3));
	int32x4_t t3 = vtrn2q_s32(vreinterpretq_s32_s8(r2), vreinterpretq_s32_s8(r3));
	g[0] = vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2)));
	g[1] = vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3)));
	g[2] = vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2)));
	g[3] = vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3)));
}

// neon_dot8 is the dot of 8 transposed weight groups (G[0..7]: lane i =
// row i) with one activation block x (32 int8, groups broadcast by lane).
DT_INLINE int32x4_t neon_dot8(const int8x16_t G[8], const uint8_t *x) {
	const int8x16_t x0 = vld1q_s8((const int8_t *)x), x1 = vld1q_s8((const int8_t *)x + 16);
	int32x4_t s0 = vdotq_laneq_s32(vdupq_n_s32(0), G[0], x0, 0);
	int32x4_t s1 = vdotq_laneq_s32(vdupq_n_s32(0), G[1], x0, 1);
	s0 = vdotq_laneq_s32(s0, G[2], x0, 2);
	s1 = vdotq_laneq_s32(s1, G[3], x0, 3);
	s0 = vdotq_laneq_s32(s0, G[4], x1, 0);
	s1 = vdotq_laneq_s32(s1, G[5], x1, 1);
	s0 = vdotq_laneq_s32(s0, G[6], x1, 2);
	s1 = vdotq_laneq_s32(s1, G[7], x1, 3);
	return vaddq_s32(s0, s1);
}
#endif

#if defined(DT_AVX512)
DT_INLINE float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

// exp512 is expf for 16 lanes, within 2 ulp for |x| < 87, exact 0 below
// about -104 and +inf above 88.7. vscalefps applies 2^n without building
// the exponent by hand, so overflow and underflow come out right.
DT_INLINE __m512 exp512(__m512 x) {
	const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
	const __m512 ln2hi = _mm512_set1_ps(0.693359375f), ln2lo = _mm512_set1_ps(-2.12194440e-4f);
	x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(89.0f)), _mm512_set1_ps(-105.0f));
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, ln2hi, x);
	r = _mm512_fnmadd_ps(n, ln2lo, r);
	__m512 p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	return _mm512_scalef_ps(p, n);
}
#endif

#if defined(DT_AVX2)
DT_INLINE float hsum256(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// exp256 is exp512 for 8 lanes; 2^n is built in the exponent field, split
// in two factors so that n down to -150 still gives the right subnormal or
// zero.
DT_INLINE __m256 exp256(__m256 x) {
	const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
	const __m256 ln2hi = _mm256_set1_ps(0.693359375f), ln2lo = _mm256_set1_ps(-2.12194440e-4f);
	x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(89.0f)), _mm256_set1_ps(-105.0f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, ln2hi, x);
	r = _mm256_fnmadd_ps(n, ln2lo, r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i ni = _mm256_cvtps_epi32(n);
	__m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
	__m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
	return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
#endif

#endif
