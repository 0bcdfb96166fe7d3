// Kernels of the CUDA device (cuda.go): the operations of device.Device
// that are not matrix products (cuBLAS does those, or gemm below where
// cuBLAS is missing). Row-major float32 throughout; shapes in the comments
// use the names of device.Device. Compiled to PTX for compute 7.5 (make ptx),
// so the driver JITs it for every newer card. Launches: 1-D grids over
// elements use blocks of 256 threads; row kernels use one block of 256
// threads per row (reduce.h's reductions assume that size).

#include <cuda_fp16.h>

#include "reduce.h"

extern "C" {

// ---- matrix product fallback ------------------------------------------

// gemm: C[M×N] = op(A)·op(B) + beta·C, op(A)[i,k] = ta ? A[k·lda+i] :
// A[i·lda+k], op(B)[k,j] = tb ? B[j·ldb+k] : B[k·ldb+j]. 16×16 tiles;
// used only where cuBLAS is not installed (a driver-only machine).
#define TILE 16
__global__ void gemm(float *C, const float *A, const float *B, int M, int N, int K,
                     int lda, int ldb, int ldc, int ta, int tb, float beta) {
    __shared__ float As[TILE][TILE + 1], Bs[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (i < M && ka < K) ? (ta ? A[(long)ka * lda + i] : A[(long)i * lda + ka]) : 0.f;
        Bs[ty][tx] = (kb < K && j < N) ? (tb ? B[(long)j * ldb + kb] : B[(long)kb * ldb + j]) : 0.f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (i < M && j < N) {
        float *c = &C[(long)i * ldc + j];
        *c = beta == 0.f ? acc : acc + beta * *c;
    }
}

// ---- gathers, elementwise ----------------------------------------------

// embed: out[n×cols] = table rows tokens[i].
__global__ void embed(float *out, const float *table, const int *tokens, int n, int cols) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i >= (long)n * cols) return;
    int r = i / cols, c = i % cols;
    out[i] = table[(long)tokens[r] * cols + c];
}

__device__ float sigm(float x) { return 1.f / (1.f + __expf(-x)); }

__global__ void silu(float *out, const float *x, long n) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i < n) out[i] = x[i] * sigm(x[i]);
}

__global__ void silu_backward(float *dx, const float *dout, const float *x, long n) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i >= n) return;
    float s = sigm(x[i]);
    dx[i] += dout[i] * s * (1.f + x[i] * (1.f - s));
}

__global__ void swiglu(float *out, const float *gate, const float *up, long n) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i < n) out[i] = gate[i] * sigm(gate[i]) * up[i];
}

__global__ void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                const float *up, long n) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i >= n) return;
    float g = gate[i], s = sigm(g), d = dout[i];
    dgate[i] += d * up[i] * s * (1.f + g * (1.f - s));
    dup[i] += d * g * s;
}

__global__ void add(float *out, const float *a, const float *b, long n) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// concat: out[n×(ca+cb)] = [a ‖ b]; with back != 0 it is the backward
// pass: a += out[:, :ca], b += out[:, ca:] (either may be null).
__global__ void concat(float *out, float *a, float *b, int n, int ca, int cb, int back) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    int c = ca + cb;
    if (i >= (long)n * c) return;
    int r = i / c, k = i % c;
    if (k < ca) {
        if (!back) out[i] = a[(long)r * ca + k];
        else if (a) a[(long)r * ca + k] += out[i];
    } else {
        if (!back) out[i] = b[(long)r * cb + k - ca];
        else if (b) b[(long)r * cb + k - ca] += out[i];
    }
}

__global__ void gate(float *out, const float *zpre, const float *h1, const float *h2, long n) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i >= n) return;
    float z = sigm(zpre[i]);
    out[i] = z * h1[i] + (1.f - z) * h2[i];
}

__global__ void gate_backward(float *dzpre, float *dh1, float *dh2, const float *dout,
                              const float *zpre, const float *h1, const float *h2, long n) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i >= n) return;
    float z = sigm(zpre[i]), d = dout[i];
    dzpre[i] += d * (h1[i] - h2[i]) * z * (1.f - z);
    dh1[i] += d * z;
    dh2[i] += d * (1.f - z);
}

// rope rotates pair (2i, 2i+1) of every head of x[n × heads·hd] by
// sign·pos[r]·theta^(−2i/hd)/freqs[i] (freqs null: 1, plain RoPE; Llama
// 3's long-context factors otherwise). The angle is taken in double:
// positions in the thousands would lose a float's precision.
__device__ void ropePair(float *x, const int *pos, const float *freqs, long i, int heads, int hd, float theta,
                         float sign) {
    int half = hd / 2;
    int p = i % half;
    long rh = i / half;
    int r = rh / heads;
    double ang = sign * (double)pos[r] * pow((double)theta, -2.0 * p / hd);
    if (freqs) ang /= (double)freqs[p];
    double s, c;
    sincos(ang, &s, &c);
    float *v = x + rh * hd + 2 * p;
    float x0 = v[0], x1 = v[1];
    v[0] = (float)(x0 * c - x1 * s);
    v[1] = (float)(x0 * s + x1 * c);
}

__global__ void rope(float *x, const int *pos, const float *freqs, int n, int heads, int hd, float theta,
                     float sign) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i < (long)n * heads * (hd / 2)) ropePair(x, pos, freqs, i, heads, hd, theta, sign);
}

// rope_qk is rope over a pass's queries q [n × heads·hd] and keys k
// [n × kvHeads·hd] in one launch: the threads past q's pairs take k's.
__global__ void rope_qk(float *q, float *k, const int *pos, const float *freqs, int n, int heads, int kvHeads,
                        int hd, float theta) {
    long i = (long)blockIdx.x * BS + threadIdx.x, nq = (long)n * heads * (hd / 2);
    if (i < nq)
        ropePair(q, pos, freqs, i, heads, hd, theta, 1.f);
    else if (i - nq < (long)n * kvHeads * (hd / 2))
        ropePair(k, pos, freqs, i - nq, kvHeads, hd, theta, 1.f);
}

// ---- row kernels: one block per row ------------------------------------

// rmsnorm: out[r] = x[r]·rstd(x[r])⊙w with rstd = 1/sqrt(mean(x²) + eps).
__global__ void rmsnorm(float *out, const float *x, const float *w, int c, float eps) {
    __shared__ float sh[32];
    const float *xr = x + (long)blockIdx.x * c;
    float *or_ = out + (long)blockIdx.x * c;
    float ss = 0.f;
    for (int i = threadIdx.x; i < c; i += BS) ss += xr[i] * xr[i];
    float rstd = rsqrtf(blockSum(ss, sh) / c + eps);
    for (int i = threadIdx.x; i < c; i += BS) or_[i] = xr[i] * rstd * w[i];
}

// rmsnorm_backward_x: dx[r] += rstd·(g − x̂·mean(g⊙x̂)) with g = dout⊙w,
// x̂ = x·rstd; it stores rstd[r] for rmsnorm_backward_w.
__global__ void rmsnorm_backward_x(float *dx, float *rstdOut, const float *dout, const float *x,
                                   const float *w, int c, float eps) {
    __shared__ float sh[32];
    long off = (long)blockIdx.x * c;
    const float *xr = x + off, *dr = dout + off;
    float ss = 0.f;
    for (int i = threadIdx.x; i < c; i += BS) ss += xr[i] * xr[i];
    float rstd = rsqrtf(blockSum(ss, sh) / c + eps);
    float dot = 0.f;
    for (int i = threadIdx.x; i < c; i += BS) dot += dr[i] * w[i] * xr[i] * rstd;
    dot = blockSum(dot, sh) / c;
    if (threadIdx.x == 0) rstdOut[blockIdx.x] = rstd;
    if (!dx) return;
    for (int i = threadIdx.x; i < c; i += BS) dx[off + i] += rstd * (dr[i] * w[i] - xr[i] * rstd * dot);
}

// rmsnorm_backward_w: dw[i] += Σ_r dout[r,i]·x[r,i]·rstd[r], a thread per
// column.
__global__ void rmsnorm_backward_w(float *dw, const float *rstd, const float *dout, const float *x,
                                   int n, int c) {
    int i = blockIdx.x * BS + threadIdx.x;
    if (i >= c) return;
    float acc = 0.f;
    for (int r = 0; r < n; r++) acc += dout[(long)r * c + i] * x[(long)r * c + i] * rstd[r];
    dw[i] += acc;
}

// smoothl1: loss[r] = mean_c SmoothL1(pred − target), dpred += scale·∂/∂pred.
__global__ void smoothl1(float *dpred, float *loss, const float *pred, const float *target, int c,
                         float scale) {
    __shared__ float sh[32];
    long off = (long)blockIdx.x * c;
    float l = 0.f, inv = 1.f / c;
    for (int i = threadIdx.x; i < c; i += BS) {
        float d = pred[off + i] - target[off + i], a = fabsf(d), g = d;
        if (a < 1.f) l += 0.5f * d * d;
        else { l += a - 0.5f; g = copysignf(1.f, d); }
        if (dpred) dpred[off + i] += scale * g * inv;
    }
    l = blockSum(l, sh);
    if (threadIdx.x == 0) loss[blockIdx.x] = l * inv;
}

// soft_cross_entropy: p = softmax(target), q = softmax(logits) per row;
// loss = −Σ p log q; agree = argmax q == argmax p; dlogits += scale·(q − p).
__global__ void soft_cross_entropy(float *dlogits, float *loss, float *agree, const float *logits,
                                   const float *target, int v, float scale) {
    __shared__ float sh[32];
    __shared__ int shi[32];
    long off = (long)blockIdx.x * v;
    const float *lr = logits + off, *tr = target + off;
    float mq = -INFINITY, mp = -INFINITY;
    int aq = 0x7fffffff, ap = 0x7fffffff;
    for (int i = threadIdx.x; i < v; i += BS) {
        if (lr[i] > mq) { mq = lr[i]; aq = i; }
        if (tr[i] > mp) { mp = tr[i]; ap = i; }
    }
    aq = blockArgMax(mq, aq, sh, shi);
    ap = blockArgMax(mp, ap, sh, shi);
    mq = lr[aq];
    mp = tr[ap];
    float sq = 0.f, sp = 0.f;
    for (int i = threadIdx.x; i < v; i += BS) {
        sq += __expf(lr[i] - mq);
        sp += __expf(tr[i] - mp);
    }
    sq = blockSum(sq, sh);
    sp = blockSum(sp, sh);
    float lq = mq + logf(sq), isq = 1.f / sq, isp = 1.f / sp;
    float l = 0.f;
    for (int i = threadIdx.x; i < v; i += BS) {
        float p = __expf(tr[i] - mp) * isp;
        l -= p * (lr[i] - lq);
        if (dlogits) dlogits[off + i] += scale * (__expf(lr[i] - mq) * isq - p);
    }
    l = blockSum(l, sh);
    if (threadIdx.x == 0) {
        loss[blockIdx.x] = l;
        if (agree) agree[blockIdx.x] = aq == ap ? 1.f : 0.f;
    }
}

// topk: the k largest of scale·logits[row] into ids/logp[row·k …], largest
// first, lower index first among equals, with their log-probabilities.
// Each of the k passes takes the largest value ranked after the previous
// pick, so no list of picks is needed; k is small (a tree's top-k).
__global__ void topk(int *ids, float *logp, const float *logits, int v, int k, float scale) {
    __shared__ float sh[32];
    __shared__ int shi[32];
    const float *lr = logits + (long)blockIdx.x * v;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < v; i += BS) mx = fmaxf(mx, lr[i] * scale);
    mx = blockMax(mx, sh);
    float s = 0.f;
    for (int i = threadIdx.x; i < v; i += BS) s += __expf(lr[i] * scale - mx);
    float lse = mx + logf(blockSum(s, sh));
    float pv = INFINITY;
    int pi = -1;
    for (int r = 0; r < k; r++) {
        float bv = -INFINITY;
        int bi = 0x7fffffff;
        for (int i = threadIdx.x; i < v; i += BS) {
            float x = lr[i] * scale;
            if ((x < pv || (x == pv && i > pi)) && (x > bv || (x == bv && i < bi))) { bv = x; bi = i; }
        }
        bi = blockArgMax(bv, bi, sh, shi);
        pi = bi;
        pv = lr[bi] * scale;
        if (threadIdx.x == 0) {
            ids[(long)blockIdx.x * k + r] = bi;
            logp[(long)blockIdx.x * k + r] = pv - lse;
        }
    }
}

// ---- attention -----------------------------------------------------------

// visible: does query row j see key t? Keys before past are committed
// positions; pending key i = t − past is seen under mask (null: causal).
__device__ bool visible(const unsigned char *mask, int past, int pend, int rows, int j, int t) {
    if (t < past) return true;
    int i = t - past;
    if (!mask) return i <= pend - rows + j;
    return mask[j * pend + i] != 0;
}

} // extern "C"

__device__ __forceinline__ float kvLoad(const float *p) { return *p; }
__device__ __forceinline__ float kvLoad(const __half *p) { return __half2float(*p); }

// attend: one block per (query row j, head h). probs[j][h][t] gets the
// weights, out[j][h] = Σ_t probs·v. Dynamic shared memory: hd floats. The
// keys and values are float32 (a draft's) or halves (a target's layers'
// cache on the GPU). pp holds past and pend in device memory: a step's
// graph (graph.go) keeps its arguments from step to step.
// With xq set (hd a multiple of 32), the output is also left in 8 bits
// as quantize_q8 leaves it (xq, and ds per 32 values), for the product
// that reads it next: each warp writes 32 consecutive values of a head.
template <typename KV>
__device__ void attend(float *out, float *probs, const float *q, const KV *k, const KV *v,
                       const unsigned char *mask, int heads, int kvheads, int hd, const int *pp, int rows,
                       int8_t *xq, float2 *ds) {
    extern __shared__ float qs[];
    __shared__ float sh[32];
    int past = pp[0], pend = pp[1];
    int j = blockIdx.x, h = blockIdx.y, g = h / (heads / kvheads);
    int keys = past + pend, qd = heads * hd, kvd = kvheads * hd;
    float scale = rsqrtf((float)hd);
    const float *qr = q + (long)j * qd + h * hd;
    for (int d = threadIdx.x; d < hd; d += BS) qs[d] = qr[d];
    __syncthreads();
    float *p = probs + ((long)j * heads + h) * keys;
    float mx = -INFINITY;
    for (int t = threadIdx.x; t < keys; t += BS) {
        float s = -INFINITY;
        if (visible(mask, past, pend, rows, j, t)) {
            const KV *kr = k + (long)t * kvd + g * hd;
            s = 0.f;
            for (int d = 0; d < hd; d++) s += qs[d] * kvLoad(kr + d);
            s *= scale;
        }
        p[t] = s;
        mx = fmaxf(mx, s);
    }
    mx = blockMax(mx, sh);
    float sum = 0.f;
    for (int t = threadIdx.x; t < keys; t += BS) {
        float e = p[t] == -INFINITY ? 0.f : __expf(p[t] - mx);
        p[t] = e;
        sum += e;
    }
    float inv = 1.f / blockSum(sum, sh);
    for (int t = threadIdx.x; t < keys; t += BS) p[t] *= inv;
    __syncthreads();
    long o = (long)j * qd + h * hd;
    for (int d = threadIdx.x; d < hd; d += BS) {
        float acc = 0.f;
        for (int t = 0; t < keys; t++) acc += p[t] * kvLoad(v + (long)t * kvd + g * hd + d);
        out[o + d] = acc;
        if (xq) quantizeLane(xq, ds, o + d, acc);
    }
}

extern "C" {

__global__ void attention(float *out, float *probs, const float *q, const float *k, const float *v,
                          const unsigned char *mask, int heads, int kvheads, int hd, const int *pp, int rows,
                          int8_t *xq, float2 *ds) {
    attend(out, probs, q, k, v, mask, heads, kvheads, hd, pp, rows, xq, ds);
}

// attention_h is attention over a cache of halves.
__global__ void attention_h(float *out, float *probs, const float *q, const __half *k, const __half *v,
                            const unsigned char *mask, int heads, int kvheads, int hd, const int *pp, int rows,
                            int8_t *xq, float2 *ds) {
    attend(out, probs, q, k, v, mask, heads, kvheads, hd, pp, rows, xq, ds);
}

// store_half: dst[i] = src[i] rounded to half (nearest, even), i < n.
__global__ void store_half(__half *dst, const float *src, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2half_rn(src[i]);
}

// store_half2 is store_half of a pass's keys and values, n each, in one
// launch, into the caches at dk and dv from offsets off[0] and off[1]:
// in device memory, so that a step's graph keeps its arguments.
__global__ void store_half2(__half *dk, const float *k, __half *dv, const float *v, long n, const int *off) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        dk[off[0] + i] = __float2half_rn(k[i]);
    else if (i < 2 * n)
        dv[off[1] + i - n] = __float2half_rn(v[i - n]);
}

// attention_backward, per (j, h) block, with P the weights and dS kept in
// scratch ds (same layout as probs):
//   dP = dout_h·v_gᵀ, dS = P⊙(dP − Σ P⊙dP)·scale,
//   dq_h += dS·k_g, dk_g += dSᵀ·q_h, dv_g += Pᵀ·dout_h.
// Rows and the heads of a group all add into dk and dv: atomics.
__global__ void attention_backward(float *dq, float *dk, float *dv, float *ds, const float *dout,
                                   const float *probs, const float *q, const float *k,
                                   const float *v, int heads, int kvheads, int hd, int past,
                                   int pend) {
    extern __shared__ float sm[]; // dout_h, q_h
    __shared__ float sh[32];
    int j = blockIdx.x, h = blockIdx.y, g = h / (heads / kvheads);
    int keys = past + pend, qd = heads * hd, kvd = kvheads * hd;
    float scale = rsqrtf((float)hd);
    float *dos = sm, *qs = sm + hd;
    for (int d = threadIdx.x; d < hd; d += BS) {
        dos[d] = dout[(long)j * qd + h * hd + d];
        qs[d] = q[(long)j * qd + h * hd + d];
    }
    __syncthreads();
    long po = ((long)j * heads + h) * keys;
    const float *p = probs + po;
    float *dS = ds + po;
    float dot = 0.f;
    for (int t = threadIdx.x; t < keys; t += BS) {
        float dp = 0.f;
        if (p[t] != 0.f) {
            const float *vr = v + (long)t * kvd + g * hd;
            for (int d = 0; d < hd; d++) dp += dos[d] * vr[d];
        }
        dS[t] = dp;
        dot += p[t] * dp;
    }
    dot = blockSum(dot, sh);
    for (int t = threadIdx.x; t < keys; t += BS) dS[t] = p[t] * (dS[t] - dot) * scale;
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += BS) {
        float acc = 0.f;
        for (int t = 0; t < keys; t++) acc += dS[t] * k[(long)t * kvd + g * hd + d];
        dq[(long)j * qd + h * hd + d] += acc;
    }
    for (long e = threadIdx.x; e < (long)keys * hd; e += BS) {
        int t = e / hd, d = e % hd;
        if (p[t] == 0.f) continue;
        atomicAdd(&dk[(long)t * kvd + g * hd + d], dS[t] * qs[d]);
        atomicAdd(&dv[(long)t * kvd + g * hd + d], p[t] * dos[d]);
    }
}

// ---- sums, optimizer -------------------------------------------------------

// sum: partial[b] = Σ (squared when sq) of block b's grid-stride share, in
// double; the host adds the partials.
__global__ void sum(double *partial, const float *x, long n, int sq) {
    __shared__ double sh[BS];
    double s = 0;
    for (long i = (long)blockIdx.x * BS + threadIdx.x; i < n; i += (long)gridDim.x * BS) {
        double v = x[i];
        s += sq ? v * v : v;
    }
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int o = BS / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

// adamw: PyTorch's AdamW; c1, c2 are the bias corrections 1 − β^step.
__global__ void adamw(float *param, const float *grad, float *m, float *v, long n, float lr,
                      float b1, float b2, float eps, float wd, float c1, float c2, float gscale,
                      int decay) {
    long i = (long)blockIdx.x * BS + threadIdx.x;
    if (i >= n) return;
    float g = grad[i] * gscale;
    float mi = b1 * m[i] + (1.f - b1) * g;
    float vi = b2 * v[i] + (1.f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float x = param[i];
    if (decay) x -= lr * wd * x;
    x -= lr * (mi / c1) / (sqrtf(vi / c2) + eps);
    param[i] = x;
}

} // extern "C"
