// What a kernel source (.cu) sees of CUDA, for compiling it as C++ on the
// host: the built-in indices, shared memory, warp shuffles, barriers,
// atomics, halves and the intrinsics the kernels use. emu.cpp runs the
// threads of a block as fibers on one OS thread, switching at each
// barrier, so a kernel's arithmetic and its thread layout are what the
// GPU would run (not its timing, nor its memory model beyond the barriers).
//
// The build (cudaemu.go) includes this header before each .cu file and
// rewrites `extern __shared__ T name[];` into emu_dynamic_shared.

#ifndef DOVETAIL_CUDA_EMU_H
#define DOVETAIL_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
// Every fiber of a block runs on the launching OS thread, blocks one after
// another: a thread-local static is the block's shared memory.
#define __shared__ static thread_local

struct dim3 {
    unsigned x, y, z;
};

struct emu_thread {
    dim3 tid;
    int linear; // x + y·bx + z·bx·by
};

extern "C" {
const emu_thread *emu_self(void);
const dim3 *emu_block_idx(void);
const dim3 *emu_block_dim(void);
const dim3 *emu_grid_dim(void);
void *emu_dynamic_shared(void);
// emu_warp_exchange publishes v for the calling lane, waits for every
// live lane of its warp, and returns lane src's value (then waits again,
// so the slots may be reused).
uint64_t emu_warp_exchange(uint64_t v, int src);
void emu_syncthreads(void);
void emu_atomic_lock(void);
void emu_atomic_unlock(void);
}

#define threadIdx (emu_self()->tid)
#define blockIdx (*emu_block_idx())
#define blockDim (*emu_block_dim())
#define gridDim (*emu_grid_dim())
#define warpSize 32

static inline void __syncthreads(void) { emu_syncthreads(); }

template <class T> static inline uint64_t emu_bits(T v) {
    static_assert(sizeof(T) <= 8, "a shuffled value fits 64 bits");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}

template <class T> static inline T emu_from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

static inline int emu_lane(void) { return emu_self()->linear & 31; }

// The kernels shuffle with the full mask only: every lane takes part.
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) {
    return emu_from_bits<T>(emu_warp_exchange(emu_bits(v), emu_lane() ^ o));
}

template <class T> static inline T __shfl_down_sync(unsigned, T v, int o) {
    int src = emu_lane() + o;
    return emu_from_bits<T>(emu_warp_exchange(emu_bits(v), src < 32 ? src : emu_lane()));
}

template <class T> static inline T __shfl_sync(unsigned, T v, int src) {
    return emu_from_bits<T>(emu_warp_exchange(emu_bits(v), src & 31));
}

template <class T> static inline T atomicAdd(T *p, T v) {
    emu_atomic_lock();
    T old = *p;
    *p = old + v;
    emu_atomic_unlock();
    return old;
}

struct float2 {
    float x, y;
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }

// glibc declares __expf and __logf but does not export them.
#define __expf expf
#define __logf logf
static inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __uint_as_float(uint32_t u) { return emu_from_bits<float>(u); }

#endif
