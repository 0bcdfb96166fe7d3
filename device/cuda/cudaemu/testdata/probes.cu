// Kernels that probe the emulator itself (cudaemu_test.go): the warp's
// shuffles, the block's barrier and shared memory, and the faults it must
// report.

extern "C" {

// warp_sums: per thread i, the warp's sum by xor shuffles (every lane) and
// by down shuffles (lane 0 gets the whole sum).
__global__ void warp_sums(float *out, const float *x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i], w = x[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffff, w, o);
    out[2 * i] = v;
    out[2 * i + 1] = w;
}

// reverse: each block reverses its blockDim.x values through shared
// memory, right only if every thread waits for the others' writes.
__global__ void reverse(float *out, const float *x) {
    __shared__ float sh[1024];
    int t = threadIdx.x, b = blockIdx.x * blockDim.x;
    sh[t] = x[b + t];
    __syncthreads();
    out[b + t] = sh[blockDim.x - 1 - t];
}

// reverse_dynamic is reverse through dynamic shared memory.
__global__ void reverse_dynamic(float *out, const float *x) {
    extern __shared__ float dyn[];
    int t = threadIdx.x, b = blockIdx.x * blockDim.x;
    dyn[t] = x[b + t];
    __syncthreads();
    out[b + t] = dyn[blockDim.x - 1 - t];
}

// write_past writes one value past n.
__global__ void write_past(float *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) p[i] = 1.f;
}

// read_at: out[0] = p[i].
__global__ void read_at(float *out, const float *p, int i) { out[0] = p[i]; }

// exited_shuffle: odd lanes return, even lanes shuffle with the full
// mask.
__global__ void exited_shuffle(float *out) {
    if (threadIdx.x & 1) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffff, 1.f, 2);
}

// diverge: odd lanes wait at the block's barrier while even lanes shuffle.
__global__ void diverge(float *out) {
    if (threadIdx.x & 1) {
        __syncthreads();
    } else {
        out[threadIdx.x] = __shfl_xor_sync(0xffffffff, 1.f, 2);
    }
}

} // extern "C"
