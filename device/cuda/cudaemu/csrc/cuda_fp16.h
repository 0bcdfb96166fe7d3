// cuda_fp16.h for kernels compiled on the host (cuda_emu.h): a half is its
// IEEE bits; conversions round to nearest even, as the GPU's do.

#ifndef DOVETAIL_CUDA_EMU_FP16_H
#define DOVETAIL_CUDA_EMU_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "blocks.h"

struct __half {
    uint16_t bits;
};

// A half's value is blocks.h's f16 of its bits, as the kernels' host
// tests read it.
static inline float __half2float(__half h) { return f16(h.bits); }

static inline __half __float2half_rn(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    uint16_t h;
    if (ax > 0x7f800000) {
        h = (uint16_t)(sign | 0x7e00); // NaN
    } else if (ax >= 0x477ff000) {     // rounds to ≥ 65520: infinity
        h = (uint16_t)(sign | 0x7c00);
    } else if (ax < 0x38800000) { // below the smallest normal half: a subnormal
        float a;
        memcpy(&a, &ax, 4);
        // a · 2^24 rounded to nearest even is the subnormal's mantissa.
        float s = a * 16777216.f;
        uint32_t m = (uint32_t)nearbyintf(s);
        h = (uint16_t)(sign | m);
    } else {
        uint32_t e = ((ax >> 23) - 112) << 10, m = (ax >> 13) & 0x3ff, rest = ax & 0x1fff;
        uint32_t v = e | m;
        if (rest > 0x1000 || (rest == 0x1000 && (v & 1))) v++;
        h = (uint16_t)(sign | v);
    }
    return __half{h};
}

static inline __half __float2half(float f) { return __float2half_rn(f); }

#endif
