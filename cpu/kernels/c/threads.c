// A pool of C threads for the packed matrix products of a forward pass.
//
// A decode step runs about a hundred matrix products of tens to hundreds of
// microseconds. Split over Go goroutines, every product handed work to a
// parked thread and was woken when it finished: about 115 context switches
// a token, 1.4 CPUs busy out of 2, and two threads decoding at 0.7 times
// llama.cpp's speed. Here one call from Go runs a whole product: the caller
// and the pool's threads take pieces of it through an atomic counter, and
// idle threads spin on the job counter for a while (under a millisecond,
// longer than the gaps between a forward pass's products) before they
// sleep on it with a futex. The threads block every signal, so the Go
// runtime's signals only ever reach its own threads.
#include "common.h"
#include "packed.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#define DT_THREADS 1
#endif

// dt_matmul_fn is the signature of every dt_matmul_<type>, dt_packed_fn
// that of every dt_matmul_packed_<type>: Go passes the pool the one a
// product needs (its kernel table resolves them by name), so that the pool
// knows no list of types.
typedef void (*dt_matmul_fn)(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols);
typedef void (*dt_packed_fn)(float *out, int64_t ldo, const uint8_t *pw, int64_t rows, int64_t lo, int64_t hi,
                             const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t amx);

void dt_attention_block(float *out, const float *q, const uint16_t *kc, const uint16_t *vc, int64_t past,
                        int64_t n, const uint8_t *mask, int64_t heads, int64_t kvheads, int64_t hd,
                        uint32_t scale_bits, int64_t jlo, int64_t jhi, int64_t hlo, int64_t hhi, float *s);

int64_t dt_pack_rows(void);

#if defined(DT_THREADS)

// The jobs of a pool: a chunk of a packed product over Q8_0 activations
// (pk_q8), prepared in scratch, its row groups in pieces of grain; a
// packed product that needs no preparation (pmm), its row groups in
// pieces of grain; a product in the GGUF layout by one of the level's
// dt_matmul_* (mm), its rows in pieces of grain rows; or attention.
enum { JOB_PACKED_Q8, JOB_PACKED, JOB_ROWS, JOB_ATTENTION };

// SPIN_ROUNDS of relax: a few hundred microseconds.
#define SPIN_ROUNDS 20000

typedef struct {
	int threads; // including the caller
	pthread_t *th;
	pthread_mutex_t mu; // one job at a time
	_Atomic uint32_t gen;
	_Atomic int32_t sleeping;
	uint64_t jobs;          // jobs posted (under mu)
	_Atomic uint64_t open;  // the number of the job threads may join, 0 once it is closed
	_Atomic int32_t active; // pool threads in a job
	_Atomic int64_t next;   // next piece
	_Atomic int stop;
	// The job (JOB_*), in pieces taken in turn.
	int job;
	int64_t pieces, grain, groups, chunk;
	pk_args pk;
	dt_packed_fn pmm;
	dt_matmul_fn mm;
	int64_t rb;
	void *scratch;
	float *out;
	int64_t n;
	// Or (JOB_ATTENTION) attention of rows [jlo, jhi) in groups of DT_ATT_ROWS,
	// each group's heads in hsplit pieces.
	const float *q;
	const uint16_t *kc, *vc;
	const uint8_t *mask;
	int64_t past, heads, kvheads, hd;
	uint32_t scale_bits;
	int64_t jlo, jhi, hsplit;
	float *scratch0;
} dt_pool;

// att_scratch is a thread's scratch for attention scores, grown as the
// context grows and kept for the thread's life.
static __thread float *att_buf;
static __thread int64_t att_cap;

static float *att_scratch(int64_t size) {
	if (size > att_cap) {
		float *b = realloc(att_buf, (size_t)size * sizeof *b);
		if (!b) return 0;
		att_buf = b, att_cap = size;
	}
	return att_buf;
}

// run_pieces takes pieces of the job until none is left. caller: the thread
// that posted the job, which may use the job's own scratch.
static void run_pieces(dt_pool *p, int caller) {
	float *s = 0;
	pk_args pk = p->pk;
	const int q8 = p->job == JOB_PACKED_Q8;
	if (q8) pk_begin(&pk);
	if (p->job == JOB_ATTENTION) {
		// A thread that cannot grow its scratch leaves the rows to the
		// others; the caller then falls back on the job's scratch.
		s = att_scratch(DT_ATT_ROWS * (p->past + p->n));
		if (!s && caller) s = p->scratch0;
		if (!s) return;
	}
	for (;;) {
		const int64_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->pieces) {
			if (q8) pk_end(&pk);
			return;
		}
		if (p->job == JOB_ATTENTION) {
			// Piece i: row group i/hsplit, the i%hsplit-th share of its heads.
			const int64_t j = p->jlo + i / p->hsplit * DT_ATT_ROWS, k = i % p->hsplit;
			dt_attention_block(p->out, p->q, p->kc, p->vc, p->past, p->n, p->mask, p->heads, p->kvheads, p->hd,
			                   p->scale_bits, j, j + DT_ATT_ROWS < p->jhi ? j + DT_ATT_ROWS : p->jhi,
			                   k * p->heads / p->hsplit, (k + 1) * p->heads / p->hsplit, s);
			continue;
		}
		if (p->job == JOB_ROWS) {
			const int64_t lo = i * p->grain, hi = lo + p->grain < pk.rows ? lo + p->grain : pk.rows;
			p->mm(pk.out, pk.ldo, pk.pw, p->rb, lo, hi, pk.act, pk.arb, pk.n, pk.cols);
			continue;
		}
		const int64_t g0 = i * p->grain, g1 = g0 + p->grain < p->groups ? g0 + p->grain : p->groups;
		if (!q8) {
			const int64_t gr = dt_pack_rows(), hi = g1 * gr < pk.rows ? g1 * gr : pk.rows;
			p->pmm(pk.out, pk.ldo, pk.pw, pk.rows, g0 * gr, hi, pk.act, pk.arb, pk.n, pk.cols, 0);
			continue;
		}
		pk_groups(&pk, p->chunk, p->scratch, g0, g1);
	}
}

// relax is one round of a spin-wait: a pause, and every YIELD_EVERY rounds a
// sched_yield. Linux may wake a thread on the CPU of the thread that woke it,
// though another CPU is idle, and let it preempt that thread (perf's
// sched_switch events showed it on a 2-core VM): spinning there on pauses
// alone, the woken thread held the caller off that CPU until it slept again,
// half a millisecond, and a tiny model's decode steps of 40 µs took 500
// (docs/measurements/kernels-attention-threads.md, "Small products on one
// thread, and a spin-wait that yields"). Yielding lets the thread it waits
// for run.
#define YIELD_EVERY 64

static inline void relax(int spins) {
#if defined(__x86_64__)
	_mm_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
	if (spins % YIELD_EVERY == 0) sched_yield();
}

static void *worker(void *arg) {
	dt_pool *p = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, 0);
	uint32_t seen = 0;
	for (;;) {
		int spins = 0;
		uint32_t g;
		while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
			if (++spins < SPIN_ROUNDS) {
				relax(spins);
				continue;
			}
			atomic_fetch_add(&p->sleeping, 1);
			syscall(SYS_futex, &p->gen, FUTEX_WAIT_PRIVATE, seen, 0, 0, 0);
			atomic_fetch_sub(&p->sleeping, 1);
			spins = 0;
		}
		seen = g;
		if (atomic_load(&p->stop)) return 0;
		// Join the open job, unless the caller closed it meanwhile: then
		// it never waits for this thread, and this thread never reads the
		// job. The second look comes after active counts this thread
		// (both sequentially consistent), so a closed job is never joined.
		const uint64_t job = atomic_load(&p->open);
		if (!job) continue;
		atomic_fetch_add(&p->active, 1);
		if (atomic_load(&p->open) == job) run_pieces(p, 0);
		atomic_fetch_sub_explicit(&p->active, 1, memory_order_release);
	}
}

// dispatch runs the job set up in p on the caller and whichever pool
// threads join it, and returns when they are done. The caller takes pieces
// until none is left and then closes the job: it waits for the threads
// that joined, not for one that has not woken yet. On a host whose cores
// are all busy (a draft model's threads, another program), a woken thread
// may wait a whole scheduler time slice for a core; waiting for it cost
// verification rounds of 0.5 ms up to 17 ms.
static void dispatch(dt_pool *p) {
	atomic_store(&p->next, 0);
	atomic_store(&p->open, ++p->jobs);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	if (atomic_load(&p->sleeping) > 0) syscall(SYS_futex, &p->gen, FUTEX_WAKE_PRIVATE, INT32_MAX, 0, 0, 0);
	run_pieces(p, 1);
	atomic_store(&p->open, 0);
	for (int spins = 1; atomic_load_explicit(&p->active, memory_order_acquire) > 0; spins++) relax(spins);
}

#endif

// dt_pool_new starts threads-1 threads; 0 if they cannot be started (then
// the caller runs products itself).
DT_API void *dt_pool_new(int64_t threads) {
#if defined(DT_THREADS)
	if (threads < 2) return 0;
	dt_pool *p = calloc(1, sizeof *p);
	if (!p) return 0;
	p->threads = (int)threads;
	p->th = calloc((size_t)threads, sizeof *p->th);
	if (!p->th || pthread_mutex_init(&p->mu, 0)) {
		free(p->th);
		free(p);
		return 0;
	}
	for (int i = 1; i < p->threads; i++)
		if (pthread_create(&p->th[i], 0, worker, p)) {
			p->threads = i;
			break;
		}
	return p;
#else
	(void)threads;
	return 0;
#endif
}

DT_API void dt_pool_free(void *pool) {
#if defined(DT_THREADS)
	dt_pool *p = pool;
	if (!p) return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, 1);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	syscall(SYS_futex, &p->gen, FUTEX_WAKE_PRIVATE, INT32_MAX, 0, 0, 0);
	for (int i = 1; i < p->threads; i++) pthread_join(p->th[i], 0);
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_destroy(&p->mu);
	free(p->scratch);
	free(p->th);
	free(p);
#else
	(void)pool;
#endif
}

// dt_pool_matmul_packed runs mm, the dt_matmul_packed_<type> of the
// weights' type (its ggml id), over all rows, in pieces of grain row groups
// shared by the caller and the pool's threads. The types over Q8_0
// activations (pk_q8) have their activations prepared once for all threads
// instead, and their row groups run by packed.c.
DT_API void dt_pool_matmul_packed(void *pool, int64_t type, void *mm, float *out, int64_t ldo, const uint8_t *pw,
                                  int64_t rows, const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t amx,
                                  int64_t grain) {
#if defined(DT_THREADS)
	dt_pool *p = pool;
	pthread_mutex_lock(&p->mu);
	if (!pk_q8(type)) { // no preparation
		const pk_args a = {type, out, ldo, pw, rows, act, arb, n, cols, 0};
		p->job = JOB_PACKED, p->pk = a, p->pmm = (dt_packed_fn)mm;
		p->groups = (rows + dt_pack_rows() - 1) / dt_pack_rows();
		p->grain = grain < 1 ? 1 : grain;
		p->pieces = (p->groups + p->grain - 1) / p->grain;
		dispatch(p);
		pthread_mutex_unlock(&p->mu);
		return;
	}
	if (!p->scratch) p->scratch = aligned_alloc(64, pk_scratch_bytes());
	if (!p->scratch) {
		// No memory for the shared preparation: the caller does it all.
		const pk_args a = {type, out, ldo, pw, rows, act, arb, n, cols, amx};
		pk_run(&a);
		pthread_mutex_unlock(&p->mu);
		return;
	}
	const pk_args a = {type, out, ldo, pw, rows, act, arb, n, cols, amx};
	p->job = JOB_PACKED_Q8, p->pk = a;
	p->groups = (rows + dt_pack_rows() - 1) / dt_pack_rows();
	p->grain = grain < 1 ? 1 : grain;
	p->pieces = (p->groups + p->grain - 1) / p->grain;
	for (int64_t c = 0; c < pk_chunks(&a); c++) {
		pk_prep(&a, c, p->scratch);
		p->chunk = c;
		dispatch(p);
	}
	pthread_mutex_unlock(&p->mu);
#else
	(void)pool, (void)type, (void)mm, (void)out, (void)ldo, (void)pw, (void)rows, (void)act, (void)arb, (void)n, (void)cols,
	    (void)amx, (void)grain;
#endif
}

// dt_pool_matmul runs mm, one of the level's dt_matmul_<type>, over all
// rows of w (rb bytes apart), in pieces of grain rows shared by the caller
// and the pool's threads: products of weights that do not pack go through
// the same threads as those that do, rather than through Go workers that
// the pool's spinning threads would compete with.
DT_API void dt_pool_matmul(void *pool, void *mm, float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t rows,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols, int64_t grain) {
#if defined(DT_THREADS)
	dt_pool *p = pool;
	pthread_mutex_lock(&p->mu);
	const pk_args a = {0, out, ldo, w, rows, act, arb, n, cols, 0}; // type unused: mm is the kernel
	p->job = JOB_ROWS, p->pk = a, p->mm = (dt_matmul_fn)mm, p->rb = rb;
	p->grain = grain < 1 ? 1 : grain;
	p->pieces = (rows + p->grain - 1) / p->grain;
	dispatch(p);
	pthread_mutex_unlock(&p->mu);
#else
	(void)pool, (void)mm, (void)out, (void)ldo, (void)w, (void)rb, (void)rows, (void)act, (void)arb, (void)n,
	    (void)cols, (void)grain;
#endif
}

// dt_pool_attention runs dt_attention over rows [jlo, jhi), a group of
// DT_ATT_ROWS rows (or a share of its heads) a piece, each thread with
// scratch of its own; scratch (DT_ATT_ROWS*(past+n) floats) is the
// caller's, used should a thread fail to allocate one.
DT_API void dt_pool_attention(void *pool, float *out, const float *q, const uint16_t *kc, const uint16_t *vc,
                              int64_t past, int64_t n, const uint8_t *mask, int64_t heads, int64_t kvheads, int64_t hd,
                              uint32_t scale_bits, int64_t jlo, int64_t jhi, float *scratch) {
#if defined(DT_THREADS)
	dt_pool *p = pool;
	if (jhi <= jlo) return;
	pthread_mutex_lock(&p->mu);
	p->job = JOB_ATTENTION, p->out = out, p->q = q, p->kc = kc, p->vc = vc, p->past = past, p->n = n, p->mask = mask;
	p->heads = heads, p->kvheads = kvheads, p->hd = hd, p->scale_bits = scale_bits, p->scratch0 = scratch;
	// Row groups are pieces enough for a large tree; fewer are split by
	// heads, a piece a thread: two a thread made a decode row's attention
	// slower (docs/measurements/kernels-attention-threads.md, "A decode
	// row's heads a piece a thread").
	const int64_t groups = (jhi - jlo + DT_ATT_ROWS - 1) / DT_ATT_ROWS;
	int64_t hs = (p->threads + groups - 1) / groups;
	p->hsplit = hs < 1 ? 1 : hs > heads ? heads : hs;
	p->jlo = jlo, p->jhi = jhi, p->pieces = groups * p->hsplit;
	dispatch(p);
	pthread_mutex_unlock(&p->mu);
#else
	(void)pool, (void)out, (void)q, (void)kc, (void)vc, (void)past, (void)n, (void)mask, (void)heads, (void)kvheads,
	    (void)hd, (void)scale_bits, (void)jlo, (void)jhi, (void)scratch;
#endif
}

