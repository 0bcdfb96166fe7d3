// What the C thread pool (threads.c) needs of the packed products
// (packed.c): a product's arguments, and its preparation and row groups as
// separate steps, so that a chunk's activations are prepared once and read
// by every thread.
#ifndef DOVETAIL_PACKED_H
#define DOVETAIL_PACKED_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
	int64_t type; // 0: Q8_0, 1: Q4_0, 3: Q4_K, 4: Q5_K, 5: Q6_K, 6: GGUF layout, 7: IQ4_XS, 8: Q3_K, 9: Q2_K, 10: Q5_0, 11: F16, 12: BF16, 13: IQ4_NL, 14: Q4_1, 15: Q5_1 (threads.c)
	float *out;
	int64_t ldo;
	const uint8_t *pw;
	int64_t rows;
	const uint8_t *act;
	int64_t arb, n, cols, amx;
} pk_args;

#define PK_TYPE_Q5_0 10
#define PK_TYPE_IQ4_NL 13
#define PK_TYPE_Q4_1 14
#define PK_TYPE_Q5_1 15

// pk_q8 tells the products over Q8_0 activations, which share packed.c's
// preparation: Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_1, Q5_1.
static inline int pk_q8(int64_t type) {
	return type == 0 || type == 1 || type == PK_TYPE_Q5_0 || type == PK_TYPE_IQ4_NL || type == PK_TYPE_Q4_1 || type == PK_TYPE_Q5_1;
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
