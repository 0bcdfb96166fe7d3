// What the C thread pool (threads.c) needs of the packed products
// (packed.c): a product's arguments, and its preparation and row groups as
// separate steps, so that a chunk's activations are prepared once and read
// by every thread.
#ifndef DOVETAIL_PACKED_H
#define DOVETAIL_PACKED_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
	int64_t type; // the weight type: its ggml id (quant.Type in Go), which Go passes
	float *out;
	int64_t ldo;
	const uint8_t *pw;
	int64_t rows;
	const uint8_t *act;
	int64_t arb, n, cols, amx;
} pk_args;

// The ggml ids of the types whose products packed.c prepares (ggml's enum
// ggml_type: fixed, as GGUF files store them).
#define PK_TYPE_Q4_0 2
#define PK_TYPE_Q4_1 3
#define PK_TYPE_Q5_0 6
#define PK_TYPE_Q5_1 7
#define PK_TYPE_Q8_0 8
#define PK_TYPE_IQ4_NL 20

// pk_q8 tells the products over Q8_0 activations, which share packed.c's
// preparation: Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_1, Q5_1. The pool prepares a
// chunk of their activations once for all its threads; the other packed
// types need no preparation.
static inline int pk_q8(int64_t type) {
	return type == PK_TYPE_Q8_0 || type == PK_TYPE_Q4_0 || type == PK_TYPE_Q5_0 || type == PK_TYPE_IQ4_NL ||
	       type == PK_TYPE_Q4_1 || type == PK_TYPE_Q5_1;
}

// pk_run runs a whole product of one of pk_q8's types on the calling
// thread (packed.c).
void pk_run(const pk_args *a);

// These exist at the AVX-512 level only, the one that packs.
size_t pk_scratch_bytes(void);
int64_t pk_chunks(const pk_args *a);
void pk_prep(const pk_args *a, int64_t chunk, void *scratch);
void pk_begin(const pk_args *a);
void pk_end(const pk_args *a);
void pk_groups(const pk_args *a, int64_t chunk, const void *scratch, int64_t glo, int64_t ghi);
#endif
