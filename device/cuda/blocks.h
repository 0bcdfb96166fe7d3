// The block arithmetic of the GGUF formats a GPU keeps as they are
// (device.GPUKeepsBlocks): each format's 32-value sub-blocks read into one
// common form, and that form's dot product with 32 activations quantized
// to 8 bits. quant.cu's kernels call these functions on the GPU; the tests
// (blocks_test.go) compile this same header as C on the host and check it
// against package quant's dequantization and dot products, so the
// arithmetic is tested without a GPU.
//
// Only C that is also CUDA C++: no templates, no structs with constructors.
// Under nvcc the functions are __host__ __device__ and use the device's
// intrinsics (dp4a, per-byte subtraction); elsewhere they are plain C with
// the same results.

#ifndef DOVETAIL_BLOCKS_H
#define DOVETAIL_BLOCKS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define HD static __host__ __device__ __forceinline__
#else
#define HD static inline
#endif

// Format numbers: ggml's type ids, as quant.Type has them.
enum {
    FMT_F16 = 1, FMT_Q4_0 = 2, FMT_Q8_0 = 8, FMT_Q4_K = 12, FMT_Q5_K = 13,
    FMT_Q6_K = 14, FMT_IQ4_XS = 23, FMT_BF16 = 30,
};

// Block sizes in values and bytes.
#define QK4_0 32
#define BYTES_Q4_0 18
#define QK8_0 32
#define BYTES_Q8_0 34
#define QK_K 256
#define BYTES_Q4_K 144
#define BYTES_Q5_K 176
#define BYTES_Q6_K 210
#define BYTES_IQ4_XS 136

// ---- scalars -------------------------------------------------------------

// f16 is an IEEE half's bits as a float, subnormals included.
HD float f16(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0x1f) {
        bits = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        bits = sign | ((e + 112) << 23) | (m << 13);
    } else if (m == 0) {
        bits = sign;
    } else { // subnormal: normalise
        e = 113;
        while (!(m & 0x400)) { m <<= 1; e--; }
        bits = sign | (e << 23) | ((m & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
#endif
}

// bf16 is a bfloat16's bits as a float.
HD float bf16(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __uint_as_float((uint32_t)h << 16);
#else
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
#endif
}

HD uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

// ld32a reads 4 bytes at a 4-byte aligned address; ld32u at a 2-byte
// aligned one (blocks of 18, 34 and 210 bytes leave their quants there).
HD int ld32a(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return *(const int *)p;
#else
    int v;
    memcpy(&v, p, 4);
    return v;
#endif
}

HD int ld32u(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    const uint16_t *h = (const uint16_t *)p;
    return (int)((uint32_t)h[0] | (uint32_t)h[1] << 16);
#else
    int v;
    memcpy(&v, p, 4);
    return v;
#endif
}

// dp4a is c + the dot product of a's and b's four signed bytes.
HD int dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++) c += (int8_t)(a >> 8 * i) * (int8_t)(b >> 8 * i);
    return c;
#endif
}

// sub4 subtracts each byte of b from a's (no carries between bytes).
HD int sub4(int a, int b) {
#ifdef __CUDA_ARCH__
    return (int)__vsub4((unsigned)a, (unsigned)b);
#else
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)(uint8_t)((a >> 8 * i) - (b >> 8 * i)) << 8 * i;
    return (int)r;
#endif
}

// ---- the common form -------------------------------------------------------

// Sub is 32 weights of one row as signed bytes q (value i in byte i%4 of
// q[i/4]) with their scales: weight i = (i < 16 ? d1 : d2)·q_i − m. Every
// format reads into it (Q6_K has a scale per 16 values, the others one
// per 32: d1 = d2), so the dot product and the dequantization are written
// once.
typedef struct {
    int q[8];
    float d1, d2, m;
} Sub;

// subValue is weight i of s.
HD float subValue(const Sub *s, int i) {
    int8_t q = (int8_t)(s->q[i / 4] >> 8 * (i % 4));
    return (i < 16 ? s->d1 : s->d2) * (float)q - s->m;
}

// subDot is s · x for 32 activations x (signed bytes, as Sub.q) of scale
// dx whose sum is sx/dx: Σ (d·q_i − m)·dx·x_i = dx·(d1·Σq·x + d2·Σq·x) − m·sx.
HD float subDot(const Sub *s, const int *x, float dx, float sx) {
    int lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) lo = dp4a(s->q[i], x[i], lo);
    for (int i = 4; i < 8; i++) hi = dp4a(s->q[i], x[i], hi);
    return dx * (s->d1 * (float)lo + s->d2 * (float)hi) - s->m * sx;
}

// ---- each format's sub-blocks -------------------------------------------
//
// readT reads sub-block sb (values 32·sb … 32·sb+31) of a row at row.

// Q4_0: d (f16), 16 bytes: value j low nibble, value j+16 high; w = d·(q−8).
HD void readQ4_0(Sub *s, const uint8_t *row, int sb) {
    const uint8_t *b = row + sb * BYTES_Q4_0;
    s->d1 = s->d2 = f16(ld16(b));
    s->m = 0;
    for (int i = 0; i < 4; i++) {
        int v = ld32u(b + 2 + 4 * i);
        s->q[i] = sub4(v & 0x0f0f0f0f, 0x08080808);
        s->q[i + 4] = sub4((v >> 4) & 0x0f0f0f0f, 0x08080808);
    }
}

// Q8_0: d (f16), 32 signed bytes; w = d·q.
HD void readQ8_0(Sub *s, const uint8_t *row, int sb) {
    const uint8_t *b = row + sb * BYTES_Q8_0;
    s->d1 = s->d2 = f16(ld16(b));
    s->m = 0;
    for (int i = 0; i < 8; i++) s->q[i] = ld32u(b + 2 + 4 * i);
}

// scaleMinK4 is sub-block j's 6-bit scale and min of a Q4_K/Q5_K block's
// 12 packed bytes (ggml's get_scale_min_k4).
HD void scaleMinK4(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// scalesK sets s's scales for sub-block j of a Q4_K or Q5_K block b:
// d·sc and dmin·m.
HD void scalesK(Sub *s, const uint8_t *b, int j) {
    int sc, m;
    scaleMinK4(b + 4, j, &sc, &m);
    s->d1 = s->d2 = f16(ld16(b)) * (float)sc;
    s->m = f16(ld16(b + 2)) * (float)m;
}

// Q4_K: d, dmin (f16), 12 bytes of scales, 128 bytes of nibbles: the 64
// values of sub-blocks 2k and 2k+1 share 32 bytes, low nibbles first;
// w = d·sc·q − dmin·m.
HD void readQ4_K(Sub *s, const uint8_t *row, int sb) {
    const uint8_t *b = row + (sb / 8) * BYTES_Q4_K;
    int j = sb % 8;
    scalesK(s, b, j);
    const uint8_t *qs = b + 16 + 32 * (j / 2);
    int shift = 4 * (j % 2);
    for (int i = 0; i < 8; i++) s->q[i] = (ld32a(qs + 4 * i) >> shift) & 0x0f0f0f0f;
}

// Q5_K: as Q4_K with a fifth bit: bit j of qh[l] for value l of
// sub-block j.
HD void readQ5_K(Sub *s, const uint8_t *row, int sb) {
    const uint8_t *b = row + (sb / 8) * BYTES_Q5_K;
    int j = sb % 8;
    scalesK(s, b, j);
    const uint8_t *qh = b + 16, *qs = b + 48 + 32 * (j / 2);
    int shift = 4 * (j % 2);
    for (int i = 0; i < 8; i++) {
        int h = (ld32a(qh + 4 * i) >> j) & 0x01010101;
        s->q[i] = ((ld32a(qs + 4 * i) >> shift) & 0x0f0f0f0f) | (h << 4);
    }
}

// Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed
// scales, d (f16). Each half of 128 values takes 64 low bytes and 32 high
// ones: its quarter k (a sub-block) is nibble k/2 of low bytes
// (k%2)·32 + l and bits 2k, 2k+1 of high byte l; w = d·sc·(q − 32), a
// scale per 16 values.
HD void readQ6_K(Sub *s, const uint8_t *row, int sb) {
    const uint8_t *b = row + (sb / 8) * BYTES_Q6_K;
    int half = (sb % 8) / 4, k = sb % 4;
    const uint8_t *ql = b + 64 * half + 32 * (k % 2), *qh = b + 128 + 32 * half;
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * half + 2 * k;
    float d = f16(ld16(b + 208));
    s->d1 = d * (float)sc[0];
    s->d2 = d * (float)sc[1];
    s->m = 0;
    for (int i = 0; i < 8; i++) {
        int lo = (ld32u(ql + 4 * i) >> 4 * (k / 2)) & 0x0f0f0f0f;
        int hi = (ld32u(qh + 4 * i) >> 2 * k) & 0x03030303;
        s->q[i] = sub4(lo | hi << 4, 0x20202020);
    }
}

// IQ4_NL's 16 values, which IQ4_XS's nibbles index.
#define IQ4NL_VALUES {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

#ifdef __CUDACC__
__constant__ int8_t iq4nlDev[16] = IQ4NL_VALUES;
#endif
static const int8_t iq4nlHost[16] = IQ4NL_VALUES;

// iq4Bytes maps the four nibbles (each in a byte's low half) of v through
// the IQ4_NL table.
HD int iq4Bytes(int v) {
#ifdef __CUDA_ARCH__
    const int8_t *t = iq4nlDev;
#else
    const int8_t *t = iq4nlHost;
#endif
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)(uint8_t)t[(v >> 8 * i) & 0xf] << 8 * i;
    return (int)r;
}

// IQ4_XS: d (f16), the scales' high bits (u16) and low nibbles (4
// bytes), 128 bytes of nibbles: sub-block j's 16 bytes hold values l (low)
// and l+16 (high); w = d·(ls − 32)·table[q].
HD void readIQ4_XS(Sub *s, const uint8_t *row, int sb) {
    const uint8_t *b = row + (sb / 8) * BYTES_IQ4_XS;
    int j = sb % 8;
    int ls = ((b[4 + j / 2] >> 4 * (j % 2)) & 0xf) | (((ld16(b + 2) >> 2 * j) & 3) << 4);
    s->d1 = s->d2 = f16(ld16(b)) * (float)(ls - 32);
    s->m = 0;
    const uint8_t *qs = b + 8 + 16 * j;
    for (int i = 0; i < 4; i++) {
        int v = ld32a(qs + 4 * i);
        s->q[i] = iq4Bytes(v & 0x0f0f0f0f);
        s->q[i + 4] = iq4Bytes((v >> 4) & 0x0f0f0f0f);
    }
}

// readSub reads sub-block sb of a row stored as fmt (not F16 or BF16,
// which have no sub-blocks: see floatValue).
HD void readSub(Sub *s, int fmt, const uint8_t *row, int sb) {
    switch (fmt) {
    case FMT_Q4_0: readQ4_0(s, row, sb); break;
    case FMT_Q8_0: readQ8_0(s, row, sb); break;
    case FMT_Q4_K: readQ4_K(s, row, sb); break;
    case FMT_Q5_K: readQ5_K(s, row, sb); break;
    case FMT_Q6_K: readQ6_K(s, row, sb); break;
    default: readIQ4_XS(s, row, sb); break;
    }
}

// floatValue is value i of an F16 or BF16 row.
HD float floatValue(int fmt, const uint8_t *row, int i) {
    uint16_t h = ld16(row + 2 * i);
    return fmt == FMT_BF16 ? bf16(h) : f16(h);
}

// ---- activations -----------------------------------------------------------

// quantRound is x's 8-bit code at inverse scale id (round half away from
// zero, as ggml's roundf).
HD int8_t quantRound(float x, float id) { return (int8_t)roundf(x * id); }

#endif
