// Reductions within a block of BS threads, for the row kernels of
// kernels.cu and quant.cu (each block a row): every thread gets the
// result, summed in the same order wherever it is used.

#ifndef DOVETAIL_REDUCE_H
#define DOVETAIL_REDUCE_H

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

} // extern "C"

#endif
