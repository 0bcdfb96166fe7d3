// Kernels of the CUDA device for frozen matrices kept in their GGUF blocks
// (device.GPUKeepsBlocks): the weights are dequantized in registers, never
// expanded in VRAM. The block arithmetic is blocks.h's, which the tests
// also run on the host. Shapes use device.Device's names: a matrix W is
// R×C (rows × K values here), activations x are n×K, outputs n×R.
//
// Decode and tree verification (n ≤ 64 rows) take mmvq: the activations
// are first quantized to 8 bits per 32 values (quantize_q8), then each
// warp multiplies one weight row with up to MMV_COLS activation rows
// using dp4a, so the weights are read once per MMV_COLS rows (llama.cpp's
// mmvq). F16 and BF16 rows take mmv with float activations. Larger
// batches (prefill) and the backward product dequantize tiles of rows
// (dequant) for cuBLAS.

#include "blocks.h"
#include "reduce.h"

#define MMV_WARPS 4 // rows a block: blocks are 32 × MMV_WARPS threads
#define MMV_COLS 8  // activation rows a launch

// warpSum is the sum of v over the warp, in every lane.
__device__ __forceinline__ float warpSum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// writeSums sums each lane's acc[c] over the warp into out[c·ldo + r]
// (with add set, add[c·ldo + r] plus that), c < ncols.
__device__ __forceinline__ void writeSums(float *out, const float *acc, int r, int ncols, int ldo, const float *add) {
#pragma unroll
    for (int c = 0; c < MMV_COLS; c++) {
        if (c < ncols) {
            float v = warpSum(acc[c]);
            long o = (long)c * ldo + r;
            if (threadIdx.x == 0) out[o] = add ? add[o] + v : v;
        }
    }
}

// mmvq: out[c·ldo + r] = W[r,:] · x[c,:] for c < ncols ≤ MMV_COLS, with
// x as quantize_q8 left it: xq[c×K] and (dx, sx) per 32 values in ds;
// with add set, add[c·ldo + r] + that (add may be out: a residual stream
// updated in place, each value read and written by one lane). The switch
// on fmt folds away: each kernel below passes a constant.
__device__ __forceinline__ void mmvq(int fmt, float *out, const uint8_t *w, const int8_t *xq, const float2 *ds,
                                     int rows, int K, int rowBytes, int ncols, int ldo, const float *add,
                                     int blk) {
    int r = blk * MMV_WARPS + threadIdx.y;
    if (r >= rows) return;
    int subs = K / 32;
    const uint8_t *row = w + (long)r * rowBytes;
    float acc[MMV_COLS] = {0};
    for (int sb = threadIdx.x; sb < subs; sb += 32) {
        Sub s;
        readSub(&s, fmt, row, sb);
#pragma unroll
        for (int c = 0; c < MMV_COLS; c++) {
            if (c < ncols) {
                float2 d = ds[c * subs + sb];
                acc[c] += subDot(&s, (const int *)(xq + (long)c * K + 32 * sb), d.x, d.y);
            }
        }
    }
    writeSums(out, acc, r, ncols, ldo, add);
}

// mmvqAny is mmvq for a format known only at run time: a switch to the
// kernel of each, so that each loop is still folded for its format.
__device__ __forceinline__ void mmvqAny(int fmt, float *out, const uint8_t *w, const int8_t *xq, const float2 *ds,
                                        int rows, int K, int rowBytes, int ncols, int blk) {
    switch (fmt) {
    case FMT_Q4_0: mmvq(FMT_Q4_0, out, w, xq, ds, rows, K, rowBytes, ncols, rows, 0, blk); break;
    case FMT_Q8_0: mmvq(FMT_Q8_0, out, w, xq, ds, rows, K, rowBytes, ncols, rows, 0, blk); break;
    case FMT_Q4_K: mmvq(FMT_Q4_K, out, w, xq, ds, rows, K, rowBytes, ncols, rows, 0, blk); break;
    case FMT_Q5_K: mmvq(FMT_Q5_K, out, w, xq, ds, rows, K, rowBytes, ncols, rows, 0, blk); break;
    case FMT_Q6_K: mmvq(FMT_Q6_K, out, w, xq, ds, rows, K, rowBytes, ncols, rows, 0, blk); break;
    default: mmvq(FMT_IQ4_XS, out, w, xq, ds, rows, K, rowBytes, ncols, rows, 0, blk); break;
    }
}

// silu is x·σ(x), as kernels.cu's swiglu makes it.
__device__ __forceinline__ float silu(float x) { return x * (1.f / (1.f + __expf(-x))); }

// gluRow computes, for row r of the gate G and up U, the warp's lane
// sums of both products with each of ncols activation rows (ag, au: one
// sub-block a lane at a time). Each lane reads one sub-block of both rows,
// so the activations are read once for two.
__device__ __forceinline__ void gluRow(int fmt, float *ag, float *au, const uint8_t *g, const uint8_t *u, int r,
                                       const int8_t *xq, const float2 *ds, int K, int rowBytes, int ncols) {
    int subs = K / 32;
    const uint8_t *grow = g + (long)r * rowBytes, *urow = u + (long)r * rowBytes;
#pragma unroll
    for (int c = 0; c < MMV_COLS; c++) ag[c] = au[c] = 0.f;
    for (int sb = threadIdx.x; sb < subs; sb += 32) {
        Sub sg, su;
        readSub(&sg, fmt, grow, sb);
        readSub(&su, fmt, urow, sb);
#pragma unroll
        for (int c = 0; c < MMV_COLS; c++) {
            if (c < ncols) {
                float2 d = ds[c * subs + sb];
                const int *xc = (const int *)(xq + (long)c * K + 32 * sb);
                ag[c] += subDot(&sg, xc, d.x, d.y);
                au[c] += subDot(&su, xc, d.x, d.y);
            }
        }
    }
}

// mmvqGLU is mmvq over two matrices of one format, the gate G and up U:
// out[c·ldo + r] = silu(G[r,:]·x[c,:]) · (U[r,:]·x[c,:]).
__device__ __forceinline__ void mmvqGLU(int fmt, float *out, const uint8_t *g, const uint8_t *u,
                                        const int8_t *xq, const float2 *ds, int rows, int K, int rowBytes,
                                        int ncols, int ldo) {
    int r = blockIdx.x * MMV_WARPS + threadIdx.y;
    if (r >= rows) return;
    float ag[MMV_COLS], au[MMV_COLS];
    gluRow(fmt, ag, au, g, u, r, xq, ds, K, rowBytes, ncols);
#pragma unroll
    for (int c = 0; c < MMV_COLS; c++) {
        if (c < ncols) {
            float vg = warpSum(ag[c]), vu = warpSum(au[c]);
            if (threadIdx.x == 0) out[(long)c * ldo + r] = silu(vg) * vu;
        }
    }
}

// mmvf is mmvq for F16 and BF16 rows, with float activations x[c×K].
__device__ __forceinline__ void mmvf(int fmt, float *out, const uint8_t *w, const float *x, int rows, int K,
                                     int ncols, int ldo, const float *add) {
    int r = blockIdx.x * MMV_WARPS + threadIdx.y;
    if (r >= rows) return;
    const uint8_t *row = w + (long)r * 2 * K;
    float acc[MMV_COLS] = {0};
    for (int k = threadIdx.x; k < K; k += 32) {
        float wv = floatValue(fmt, row, k);
#pragma unroll
        for (int c = 0; c < MMV_COLS; c++)
            if (c < ncols) acc[c] += wv * x[(long)c * K + k];
    }
    writeSums(out, acc, r, ncols, ldo, add);
}

// dequantSubs: a thread per 32 values: out[i×K …] = row rowIdx[i] of W
// (rowIdx nil: row row0+i), i < n.
__device__ __forceinline__ void dequantSubs(int fmt, float *out, const uint8_t *w, const int *rowIdx, int row0,
                                            int n, int K, int rowBytes) {
    long t = blockIdx.x * (long)blockDim.x + threadIdx.x;
    int subs = K / 32;
    if (t >= (long)n * subs) return;
    int i = t / subs, sb = t % subs;
    long r = rowIdx ? rowIdx[i] : row0 + i;
    Sub s;
    readSub(&s, fmt, w + r * rowBytes, sb);
    float *o = out + (long)i * K + 32 * sb; // a view's values: only 4-byte aligned
    for (int j = 0; j < 32; j++) o[j] = subValue(&s, j);
}

// dequantFloat is dequantSubs for F16 and BF16: a thread per value.
__device__ __forceinline__ void dequantFloat(int fmt, float *out, const uint8_t *w, const int *rowIdx, int row0,
                                             int n, int K) {
    long t = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (t >= (long)n * K) return;
    int i = t / K, k = t % K;
    long r = rowIdx ? rowIdx[i] : row0 + i;
    out[t] = floatValue(fmt, w + r * 2 * K, k);
}

extern "C" {

// quantize_q8: xq[i] = x[i] in 8 bits with the scale of its 32 values,
// ds[i/32] = (scale dx, dx·Σ codes); a warp per 32 values, subs of them.
__global__ void quantize_q8(int8_t *xq, float2 *ds, const float *x, long subs) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i / 32 >= subs) return; // whole warps: subs·32 values
    quantizeLane(xq, ds, i, x[i]);
}

// mmvqGLUQ8 is mmvqGLU whose output the down product reads next: a block
// of GLU_WARPS warps makes 32 consecutive rows (each warp GLU_ROWS_WARP of
// them, one after another) for up to MMV_COLS activation rows, then
// writes them with their 8-bit codes as quantize_q8 leaves them (qout,
// dsOut, laid out as out is: row c of the output at c·ldo), a warp per
// activation row. rows must be whole 32s.
#define GLU_WARPS 8
#define GLU_ROWS_WARP (32 / GLU_WARPS)
__device__ __forceinline__ void mmvqGLUQ8(int fmt, float *out, int8_t *qout, float2 *dsOut, const uint8_t *g,
                                          const uint8_t *u, const int8_t *xq, const float2 *ds, int K,
                                          int rowBytes, int ncols, int ldo) {
    __shared__ float sh[MMV_COLS][32];
    int r0 = blockIdx.x * 32;
    for (int i = 0; i < GLU_ROWS_WARP; i++) {
        int rr = threadIdx.y * GLU_ROWS_WARP + i;
        float ag[MMV_COLS], au[MMV_COLS];
        gluRow(fmt, ag, au, g, u, r0 + rr, xq, ds, K, rowBytes, ncols);
#pragma unroll
        for (int c = 0; c < MMV_COLS; c++) {
            if (c < ncols) {
                float vg = warpSum(ag[c]), vu = warpSum(au[c]);
                if (threadIdx.x == 0) sh[c][rr] = silu(vg) * vu;
            }
        }
    }
    __syncthreads();
    int c = threadIdx.y;
    if (c < ncols) {
        long o = (long)c * ldo + r0 + threadIdx.x;
        float v = sh[c][threadIdx.x];
        out[o] = v;
        quantizeLane(qout, dsOut, o, v);
    }
}

// rmsnorm_q8: a block of BS threads per row of c values (c a multiple of
// 32): out[r] = x[r]·rstd(x[r])⊙w, as kernels.cu's rmsnorm
// makes it, and beside it out[r] as quantize_q8 would leave it (xq, ds),
// for the products that read it next: one launch for two. Each warp's 32
// consecutive values are one sub-block of the codes.
__global__ void rmsnorm_q8(float *out, int8_t *xq, float2 *ds, const float *x, const float *w, int c, float eps) {
    __shared__ float sh[32];
    long off = (long)blockIdx.x * c;
    const float *xr = x + off;
    float ss = 0.f;
    for (int i = threadIdx.x; i < c; i += BS) ss += xr[i] * xr[i];
    float rstd = rsqrtf(blockSum(ss, sh) / c + eps);
    for (int i = threadIdx.x; i < c; i += BS) {
        float v = xr[i] * rstd * w[i];
        out[off + i] = v;
        quantizeLane(xq, ds, off + i, v);
    }
}

// mmvq3: the products of three matrices that read the same activations
// (a layer's Q, K and V, each in its own 8-bit format) in one launch: the
// first blocks take matrix 0's rows, the next matrix 1's, the rest matrix
// 2's; out_i is [ncols × rows_i].
__global__ void mmvq3(const int8_t *xq, const float2 *ds, int K, int ncols, float *o0, const uint8_t *w0, int f0,
                      int r0, int rb0, float *o1, const uint8_t *w1, int f1, int r1, int rb1, float *o2,
                      const uint8_t *w2, int f2, int r2, int rb2) {
    int b1 = (r0 + MMV_WARPS - 1) / MMV_WARPS, b2 = b1 + (r1 + MMV_WARPS - 1) / MMV_WARPS, b = blockIdx.x;
    if (b < b1)
        mmvqAny(f0, o0, w0, xq, ds, r0, K, rb0, ncols, b);
    else if (b < b2)
        mmvqAny(f1, o1, w1, xq, ds, r1, K, rb1, ncols, b - b1);
    else
        mmvqAny(f2, o2, w2, xq, ds, r2, K, rb2, ncols, b - b2);
}

#define MMVQ(name, fmt)                                                                                  \
    __global__ void mmvq_##name(float *out, const uint8_t *w, const int8_t *xq, const float2 *ds,     \
                                int rows, int K, int rowBytes, int ncols, int ldo, const float *add) {  \
        mmvq(fmt, out, w, xq, ds, rows, K, rowBytes, ncols, ldo, add, blockIdx.x);                     \
    }                                                                                                  \
    __global__ void mmvq_glu_##name(float *out, const uint8_t *g, const uint8_t *u, const int8_t *xq, \
                                    const float2 *ds, int rows, int K, int rowBytes, int ncols,         \
                                    int ldo) {                                                          \
        mmvqGLU(fmt, out, g, u, xq, ds, rows, K, rowBytes, ncols, ldo);                                \
    }                                                                                                  \
    __global__ void mmvq_gluq_##name(float *out, int8_t *qout, float2 *dsOut, const uint8_t *g,         \
                                     const uint8_t *u, const int8_t *xq, const float2 *ds, int K,       \
                                     int rowBytes, int ncols, int ldo) {                                \
        mmvqGLUQ8(fmt, out, qout, dsOut, g, u, xq, ds, K, rowBytes, ncols, ldo);                       \
    }                                                                                                  \
    __global__ void dequant_##name(float *out, const uint8_t *w, const int *rowIdx, int row0, int n,  \
                                   int K, int rowBytes) {                                               \
        dequantSubs(fmt, out, w, rowIdx, row0, n, K, rowBytes);                                        \
    }

MMVQ(q4_0, FMT_Q4_0)
MMVQ(q8_0, FMT_Q8_0)
MMVQ(q4_k, FMT_Q4_K)
MMVQ(q5_k, FMT_Q5_K)
MMVQ(q6_k, FMT_Q6_K)
MMVQ(iq4_xs, FMT_IQ4_XS)

#define MMVF(name, fmt)                                                                                  \
    __global__ void mmv_##name(float *out, const uint8_t *w, const float *x, int rows, int K, int ncols, \
                               int ldo, const float *add) {                                             \
        mmvf(fmt, out, w, x, rows, K, ncols, ldo, add);                                                \
    }                                                                                                  \
    __global__ void dequant_##name(float *out, const uint8_t *w, const int *rowIdx, int row0, int n,  \
                                   int K, int rowBytes) {                                               \
        dequantFloat(fmt, out, w, rowIdx, row0, n, K);                                                 \
    }

MMVF(f16, FMT_F16)
MMVF(bf16, FMT_BF16)

} // extern "C"
