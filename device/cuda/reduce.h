// Reductions within a block of BS threads, for the row kernels of
// kernels.cu and quant.cu (each block a row): every thread gets the
// result, summed in the same order wherever it is used. And a warp's 32
// values quantized to 8 bits, for the kernels whose output a product of
// 8-bit activations reads next.

#ifndef DOVETAIL_REDUCE_H
#define DOVETAIL_REDUCE_H

#include <stdint.h>

#define BS 256

extern "C" {

static __device__ float blockSum(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < BS / 32 ? sh[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

static __device__ float blockMax(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < BS / 32 ? sh[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

// blockArgMax is the first index holding the largest value (the host's
// tie-break: the lowest index wins).
static __device__ int blockArgMax(float v, int i, float *shv, int *shi) {
    for (int o = 16; o > 0; o >>= 1) {
        float v2 = __shfl_down_sync(0xffffffff, v, o);
        int i2 = __shfl_down_sync(0xffffffff, i, o);
        if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) { shv[w] = v; shi[w] = i; }
    __syncthreads();
    if (w == 0) {
        v = lane < BS / 32 ? shv[lane] : -INFINITY;
        i = lane < BS / 32 ? shi[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float v2 = __shfl_down_sync(0xffffffff, v, o);
            int i2 = __shfl_down_sync(0xffffffff, i, o);
            if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
        }
        if (lane == 0) shi[0] = i;
    }
    __syncthreads();
    return shi[0];
}

// quantizeLane: the calling warp's 32 lanes hold 32 consecutive values v
// at index i (a multiple of 32 at lane 0): each lane writes its 8-bit
// code xq[i] at the scale of the 32, and lane 0 writes (scale, scale·Σ
// codes) to ds[i/32], as quant.cu's quantize_q8 does. Every lane of the
// warp must call it.
static __device__ __forceinline__ void quantizeLane(int8_t *xq, float2 *ds, long i, float v) {
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, o));
    float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    int8_t q = (int8_t)roundf(v * id);
    int sum = q;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
    xq[i] = q;
    if ((threadIdx.x & 31) == 0) ds[i / 32] = make_float2(d, d * (float)sum);
}

} // extern "C"

#endif
