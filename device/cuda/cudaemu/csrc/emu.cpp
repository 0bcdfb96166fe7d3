// The CUDA driver API, as far as the CUDA device (device/cuda) calls it,
// over host memory, running the kernels compiled from their .cu sources
// for the host (cuda_emu.h): a CPU stand-in for libcuda.so.1 that tests
// load where no GPU is (device/cuda/cudaemu). It checks what a GPU would
// refuse or corrupt: launch shapes past the hardware's limits, copies
// outside an allocation, writes just past an allocation's end (on free),
// reads and writes further past it (a fault), and reads of memory never
// written (allocations start as NaN).
//
// A launch runs its blocks one after another on the calling OS thread,
// each block's threads as fibers that switch at barriers: a
// warp's shuffle waits for the warp's live lanes, __syncthreads for the
// block's. Timing means nothing here.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_emu.h"

// The driver's functions are the library's only exports: the kernels'
// calls into the emulator bind directly, not through the PLT.
#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_FOUND = 500,
    ILLEGAL_ADDRESS = 700,
    LAUNCH_FAILED = 719,
};

// ---- kernels ----------------------------------------------------------------

struct Kernel {
    std::string name;
    void *fn;
    void (*thunk)(void *, void **);
    std::vector<size_t> sizes; // each parameter's bytes
};

static std::map<std::string, Kernel> &registry() {
    static std::map<std::string, Kernel> r;
    return r;
}

extern "C" void emu_register(const char *name, void *fn, void (*thunk)(void *, void **), const size_t *sizes,
                             int nparams) {
    registry()[name] = Kernel{name, fn, thunk, std::vector<size_t>(sizes, sizes + nparams)};
}

// ---- fibers -------------------------------------------------------------------

// A context switch: on x86-64 the callee-saved registers and the stack
// pointer (ucontext's swapcontext would also make a system call for the
// signal mask at every switch, and a kernel switches at every shuffle).
#if defined(__x86_64__)
struct Context {
    void *sp;
};
extern "C" void emu_switch(void **save, void *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch,@function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch,.-emu_switch\n");
static void swapTo(Context *from, Context *to) { emu_switch(&from->sp, to->sp); }
static void makeContext(Context *c, char *stack, size_t bytes, void (*entry)(void)) {
    void **sp = (void **)(((uintptr_t)(stack + bytes)) & ~(uintptr_t)15);
    *--sp = NULL;            // entry's return address: it never returns
    *--sp = (void *)entry;   // where emu_switch's ret goes
    for (int i = 0; i < 6; i++) *--sp = NULL; // rbp rbx r12–r15
    c->sp = sp;
}
#else
struct Context {
    ucontext_t uc;
};
static void swapTo(Context *from, Context *to) { swapcontext(&from->uc, &to->uc); }
static void makeContext(Context *c, char *stack, size_t bytes, void (*entry)(void)) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = bytes;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}
#endif

enum { RUN, WAIT_WARP, WAIT_BLOCK, DONE };

struct Fiber {
    Context ctx;
    emu_thread t;
    int state;
    unsigned exchanges; // warp exchanges made, for their slots' parity
};

struct Launch {
    const Kernel *k;
    void **params;
    dim3 grid, block, bidx;
    int n; // threads a block
    std::vector<Fiber> fibers;
    std::vector<uint64_t> slots; // two values per thread, for shuffles
    std::vector<uint8_t> shared; // dynamic shared memory
    Context main;
};

// The stacks of this OS thread's fibers, each aligned to its size, with a header at its base that
// names its fiber and launch: code on a fiber finds them from its stack
// pointer, where a thread-local variable (in a library loaded by dlopen)
// would cost a call to __tls_get_addr at every index and shuffle.
static thread_local std::vector<char *> stacks;
static const size_t stackBytes = 256 << 10;

struct StackHeader {
    Fiber *f;
    Launch *l;
};

static inline StackHeader *self(void) {
    char here;
    uintptr_t sp = (uintptr_t)&here;
    // Hide where sp came from: a pointer made from a local's address
    // would be taken for that local's, and stores through it dropped.
    __asm__("" : "+r"(sp));
    return (StackHeader *)(sp & ~(uintptr_t)(stackBytes - 1));
}

extern "C" const emu_thread *emu_self(void) { return &self()->f->t; }
extern "C" const dim3 *emu_block_idx(void) { return &self()->l->bidx; }
extern "C" const dim3 *emu_block_dim(void) { return &self()->l->block; }
extern "C" const dim3 *emu_grid_dim(void) { return &self()->l->grid; }
extern "C" void *emu_dynamic_shared(void) { return self()->l->shared.data(); }

// wait parks the running fiber in state s until the scheduler releases it.
static void wait(int s) {
    StackHeader *h = self();
    h->f->state = s;
    swapTo(&h->f->ctx, &h->l->main);
}

extern "C" void emu_syncthreads(void) { wait(WAIT_BLOCK); }

// Exchanges alternate between two sets of slots: a lane writes set p
// again only two exchanges later, after every lane of its warp has passed
// the barrier of the exchange between, so has read set p. One barrier an
// exchange, not two.
extern "C" uint64_t emu_warp_exchange(uint64_t v, int src) {
    StackHeader *h = self();
    int me = h->f->t.linear, base = me & ~31, n = h->l->n;
    uint64_t *slots = h->l->slots.data() + (h->f->exchanges++ & 1) * n;
    slots[me] = v;
    wait(WAIT_WARP);
    return base + src < n ? slots[base + src] : v;
}

static std::mutex atomicMu;
extern "C" void emu_atomic_lock(void) { atomicMu.lock(); }
extern "C" void emu_atomic_unlock(void) { atomicMu.unlock(); }

// fiberMain runs the kernel once per block: after each it parks as DONE,
// and the scheduler resumes it for the next block (or drops it).
static void fiberMain(void) {
    for (;;) {
        Launch *l = self()->l;
        l->k->thunk(l->k->fn, l->params);
        wait(DONE);
    }
}

// release wakes the fibers a barrier holds: whole warps whose live lanes
// all wait at a shuffle, else the block when every live thread waits at
// __syncthreads. False: nothing could go on (a deadlock on a GPU too).
// A shuffle takes the full mask in these kernels: every one of the
// warp's 32 lanes must take part. One whose lanes have exited, or whose
// block ends inside the warp, is undefined on a GPU: reported (false,
// with *why set), as a deadlock is.
static bool release(Launch &l, const char **why) {
    bool any = false;
    for (int w = 0; w < l.n; w += 32) {
        int live = 0, waiting = 0;
        for (int i = w; i < w + 32 && i < l.n; i++) {
            live += l.fibers[i].state != DONE;
            waiting += l.fibers[i].state == WAIT_WARP;
        }
        if (waiting > 0 && waiting == live && live < 32) {
            *why = "a shuffle in a warp whose lanes are not all there";
            return false;
        }
        if (live > 0 && waiting == live) {
            for (int i = w; i < w + 32 && i < l.n; i++)
                if (l.fibers[i].state == WAIT_WARP) l.fibers[i].state = RUN;
            any = true;
        }
    }
    if (any) return true;
    *why = "a warp's lanes wait at different barriers";
    for (Fiber &f : l.fibers)
        if (f.state == WAIT_WARP) return false;
    for (Fiber &f : l.fibers)
        if (f.state == WAIT_BLOCK) f.state = RUN, any = true;
    return any;
}

// runBlock runs every thread of block l.bidx to its end; false (and why)
// where they cannot go on.
static bool runBlock(Launch &l, const char **why) {
    for (Fiber &f : l.fibers) f.state = RUN, f.exchanges = 0;
    for (;;) {
        for (Fiber &f : l.fibers) {
            if (f.state != RUN) continue;
            swapTo(&l.main, &f.ctx);
        }
        bool done = true;
        for (Fiber &f : l.fibers) done = done && f.state == DONE;
        if (done) return true;
        if (!release(l, why)) return false;
    }
}

static CUresult run(Launch &l) {
    l.n = l.block.x * l.block.y * l.block.z;
    while ((int)stacks.size() < l.n) {
        void *s = NULL;
        if (posix_memalign(&s, stackBytes, stackBytes) != 0) return OUT_OF_MEMORY;
        stacks.push_back((char *)s);
    }
    l.fibers.assign(l.n, Fiber{});
    l.slots.assign(2 * l.n, 0);
    for (int i = 0; i < l.n; i++) {
        Fiber &f = l.fibers[i];
        f.t.linear = i;
        f.t.tid = dim3{i % l.block.x, i / l.block.x % l.block.y, i / (l.block.x * l.block.y)};
        // Stacks a few cache lines apart in their pages: the tops of
        // page-aligned stacks would all fall in the same cache sets.
        *(StackHeader *)stacks[i] = StackHeader{&f, &l};
        makeContext(&f.ctx, stacks[i], stackBytes - 64 * (i % 61), fiberMain);
    }
    CUresult r = OK;
    for (unsigned z = 0; z < l.grid.z && r == OK; z++)
        for (unsigned y = 0; y < l.grid.y && r == OK; y++)
            for (unsigned x = 0; x < l.grid.x && r == OK; x++) {
                l.bidx = dim3{x, y, z};
                const char *why = "";
                if (!runBlock(l, &why)) {
                    fprintf(stderr, "cuda emulator: %s: block (%u,%u,%u): %s\n", l.k->name.c_str(), x, y, z, why);
                    r = LAUNCH_FAILED;
                }
            }
    return r;
}

// ---- memory -------------------------------------------------------------------

// Each allocation is mapped on its own, 256-byte aligned as CUDA's are,
// with a canary of at least 64 bytes after it (a write there is reported
// on free) and then an inaccessible page: a read or write past the
// canary stops the process at the kernel's instruction, where a GPU would
// report an illegal address or read a neighbour's memory unnoticed.
static const size_t canaryBytes = 64;
static const uint8_t canary = 0xa5;

struct Mapping {
    size_t n;     // bytes asked for
    uint8_t *map; // the mapping, guard page included
    size_t bytes; // its length
};

static std::mutex memMu;
static std::map<uintptr_t, Mapping> allocs; // address → its mapping
static size_t used;

static size_t totalMemory() {
    const char *s = getenv("DOVETAIL_CUDAEMU_MEMORY"); // bytes
    return s && *s ? strtoull(s, NULL, 10) : (size_t)8 << 30;
}

// inside reports whether [p, p+n) lies within one allocation.
static bool inside(uintptr_t p, size_t n) {
    std::lock_guard<std::mutex> g(memMu);
    auto it = allocs.upper_bound(p);
    if (it == allocs.begin()) return false;
    --it;
    return p >= it->first && p + n <= it->first + it->second.n;
}

extern "C" {

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    std::lock_guard<std::mutex> g(memMu);
    if (n == 0) return INVALID_VALUE;
    if (used + n > totalMemory()) return OUT_OF_MEMORY;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t tail = (n + canaryBytes + 255) / 256 * 256; // the values and the canary
    size_t body = (tail + page - 1) / page * page;
    uint8_t *map = (uint8_t *)mmap(NULL, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return OUT_OF_MEMORY;
    mprotect(map + body, page, PROT_NONE);
    uint8_t *m = map + body - tail;
    memset(m, 0xff, n); // NaN, as no kernel writes it
    memset(m + n, canary, tail - n);
    allocs[(uintptr_t)m] = Mapping{n, map, body + page};
    used += n;
    *p = (CUdeviceptr)m;
    return OK;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    std::lock_guard<std::mutex> g(memMu);
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end()) return INVALID_VALUE;
    uint8_t *m = (uint8_t *)p;
    Mapping a = it->second;
    for (size_t i = 0; i < canaryBytes; i++) {
        if (m[a.n + i] != canary) {
            fprintf(stderr, "cuda emulator: a kernel wrote past the end of a %zu-byte allocation\n", a.n);
            return ILLEGAL_ADDRESS;
        }
    }
    used -= a.n;
    allocs.erase(it);
    munmap(a.map, a.bytes);
    return OK;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *) {
    if (!inside(dst, n)) return INVALID_VALUE;
    memcpy((void *)dst, src, n);
    return OK;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *) {
    if (!inside(src, n)) return INVALID_VALUE;
    memcpy(dst, (void *)src, n);
    return OK;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *) {
    if (!inside(dst, n) || !inside(src, n)) return INVALID_VALUE;
    memmove((void *)dst, (void *)src, n);
    return OK;
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, void *) {
    if (!inside(dst, 4 * n)) return INVALID_VALUE;
    for (size_t i = 0; i < n; i++) ((uint32_t *)dst)[i] = v;
    return OK;
}

EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n) {
    *p = malloc(n);
    return *p ? OK : OUT_OF_MEMORY;
}

EXPORT CUresult cuMemFreeHost(void *p) {
    free(p);
    return OK;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
    std::lock_guard<std::mutex> g(memMu);
    *total = totalMemory();
    *free = *total > used ? *total - used : 0;
    return OK;
}

// ---- the device and its context ---------------------------------------------

EXPORT CUresult cuInit(unsigned) { return OK; }
EXPORT CUresult cuDriverGetVersion(int *v) {
    *v = 11080;
    return OK;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
    *n = 1;
    return OK;
}
EXPORT CUresult cuDeviceGet(int *d, int ordinal) {
    if (ordinal != 0) return INVALID_VALUE;
    *d = 0;
    return OK;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, int) {
    snprintf(name, len, "CUDA emulator on the CPU");
    return OK;
}
EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, int) {
    snprintf(id, len, "0000:00:00.0");
    return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *n, int) {
    *n = totalMemory();
    return OK;
}
// Attributes: compute capability 7.5 (what the PTX targets), a 256-bit
// bus at 7 GHz; others 0.
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int) {
    switch (attr) {
    case 75: *v = 7; break;
    case 76: *v = 5; break;
    case 36: *v = 7000000; break;
    case 37: *v = 256; break;
    default: *v = 0;
    }
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int) {
    *ctx = (void *)&registry;
    return OK;
}
EXPORT CUresult cuCtxSetCurrent(void *) { return OK; }
EXPORT CUresult cuStreamCreate(void **s, unsigned) {
    *s = malloc(1);
    return OK;
}
EXPORT CUresult cuStreamDestroy_v2(void *s) {
    free(s);
    return OK;
}
EXPORT CUresult cuStreamSynchronize(void *) { return OK; }
EXPORT CUresult cuModuleLoadData(void **m, const void *) {
    *m = (void *)&registry;
    return OK;
}
EXPORT CUresult cuModuleGetFunction(void **f, void *, const char *name) {
    auto it = registry().find(name);
    if (it == registry().end()) return NOT_FOUND;
    *f = &it->second;
    return OK;
}

} // extern "C"

// fits says whether a launch's shape is one a GPU of compute capability
// 7.5 accepts.
static bool fits(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared) {
    return gx != 0 && gy != 0 && gz != 0 && bx != 0 && by != 0 && bz != 0 && gx <= 0x7fffffffu && gy <= 65535 &&
           gz <= 65535 && bx <= 1024 && by <= 1024 && bz <= 64 && (size_t)bx * by * bz <= 1024 && shared <= 48 << 10;
}

static CUresult launch(const Kernel *k, dim3 grid, dim3 block, unsigned shared, void **params) {
    Launch l;
    l.k = k;
    l.params = params;
    l.grid = grid;
    l.block = block;
    l.shared.assign(shared, 0xff);
    return run(l);
}

// ---- graphs -------------------------------------------------------------------

// CUDA_KERNEL_NODE_PARAMS_v2 (the first fields are v1's).
struct KernelNodeParams {
    const Kernel *func;
    unsigned gx, gy, gz, bx, by, bz, shared;
    void **params, **extra;
    void *kern, *ctx;
};

// A kernel node holds copies of its arguments' values, as a driver's
// does: the caller's argument array may change after the call.
struct Node {
    const Kernel *k = NULL;
    dim3 grid{}, block{};
    unsigned shared = 0;
    std::vector<std::vector<uint8_t>> vals;

    CUresult set(const KernelNodeParams *p) {
        if (!p->func || p->extra || !fits(p->gx, p->gy, p->gz, p->bx, p->by, p->bz, p->shared)) return INVALID_VALUE;
        k = p->func;
        grid = dim3{p->gx, p->gy, p->gz};
        block = dim3{p->bx, p->by, p->bz};
        shared = p->shared;
        vals.assign(k->sizes.size(), {});
        for (size_t i = 0; i < vals.size(); i++) {
            const uint8_t *v = (const uint8_t *)p->params[i];
            vals[i].assign(v, v + k->sizes[i]);
        }
        return OK;
    }
    CUresult run() const {
        std::vector<void *> ptrs;
        for (const auto &v : vals) ptrs.push_back((void *)v.data());
        return launch(k, grid, block, shared, ptrs.data());
    }
};

// A graph's nodes run in the order they were added: the device chains
// each on the one before, and the emulator keeps no other dependencies.
// A node's handle is its index + 1, in the graph and its instances.
struct Graph {
    std::vector<Node> nodes;
};

extern "C" {

// cuLaunchKernel refuses what a GPU of compute capability 7.5 refuses.
EXPORT CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *, void **params, void **) {
    if (!fits(gx, gy, gz, bx, by, bz, shared)) return INVALID_VALUE;
    return launch((const Kernel *)f, dim3{gx, gy, gz}, dim3{bx, by, bz}, shared, params);
}

EXPORT CUresult cuGraphCreate(Graph **g, unsigned flags) {
    if (flags != 0) return INVALID_VALUE;
    *g = new Graph;
    return OK;
}

EXPORT CUresult cuGraphAddKernelNode_v2(void **node, Graph *g, void **, size_t deps, const KernelNodeParams *p) {
    if (deps > 1) return INVALID_VALUE;
    Node n;
    if (CUresult r = n.set(p)) return r;
    g->nodes.push_back(n);
    *node = (void *)(uintptr_t)g->nodes.size();
    return OK;
}

EXPORT CUresult cuGraphInstantiateWithFlags(Graph **exec, Graph *g, unsigned long long) {
    *exec = new Graph(*g);
    return OK;
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(Graph *exec, void *node, const KernelNodeParams *p) {
    size_t i = (uintptr_t)node - 1;
    if (i >= exec->nodes.size() || p->func != exec->nodes[i].k) return INVALID_VALUE;
    return exec->nodes[i].set(p);
}

EXPORT CUresult cuGraphLaunch(Graph *exec, void *) {
    for (const Node &n : exec->nodes)
        if (CUresult r = n.run()) return r;
    return OK;
}

EXPORT CUresult cuGraphExecDestroy(Graph *exec) {
    delete exec;
    return OK;
}

EXPORT CUresult cuGraphDestroy(Graph *g) {
    delete g;
    return OK;
}

static const struct {
    CUresult r;
    const char *name;
} names[] = {{OK, "CUDA_SUCCESS"},
             {INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
             {OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
             {NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
             {ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
             {LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"}};

EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
    for (auto &n : names) {
        if (n.r == r) {
            *s = n.name;
            return OK;
        }
    }
    *s = NULL;
    return INVALID_VALUE;
}

} // extern "C"
