// The row kernels' scaffolding, for the weight types and levels without
// 16-row tiles: a row kernel multiplies one weight row by NT (1..4)
// activation rows, unpacking the row once for all of them; a portable dot
// multiplies one by one.
#ifndef DOVETAIL_ROWS_H
#define DOVETAIL_ROWS_H
#include "common.h"

// row_fn is a row kernel for one NT: out[j*ldo] = dot(w, act row j) over nb
// blocks, for j < NT.
typedef void (*row_fn)(float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb, int64_t nb);

// ROW_FNS(name) instantiates name(NT, out, ldo, w, act, arb, nb) for NT =
// 1..4 (constants the compiler unrolls) and the table name##s of them,
// indexed by NT.
#define ROW_FN(name, NT)                                                                                     \
	static void name##_##NT(float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,       \
	                        int64_t nb) {                                                                     \
		name(NT, out, ldo, w, act, arb, nb);                                                                  \
	}
#define ROW_FNS(name)                                                                                         \
	ROW_FN(name, 1) ROW_FN(name, 2) ROW_FN(name, 3) ROW_FN(name, 4)                                           \
	static row_fn const name##s[5] = {0, name##_1, name##_2, name##_3, name##_4};

// rows_matmul runs weight rows [lo, hi) against n activation rows, four at
// a time.
__attribute__((unused)) static void rows_matmul(row_fn const rows[5], float *out, int64_t ldo, const uint8_t *w,
                                                int64_t rb, int64_t lo, int64_t hi, const uint8_t *act, int64_t arb,
                                                int64_t n, int64_t nb) {
	for (int64_t r = lo; r < hi; r++)
		for (int64_t j = 0; j < n; j += 4) {
			const int nt = n - j < 4 ? (int)(n - j) : 4;
			rows[nt](out + j * ldo + r, ldo, w + r * rb, act + j * arb, arb, nb);
		}
}

// dot_fn is a portable dot of one weight row with one activation row.
typedef float (*dot_fn)(const uint8_t *w, const uint8_t *x, int64_t nb);

// dots_matmul is rows_matmul with a dot per pair of rows.
__attribute__((unused)) static void dots_matmul(dot_fn dot, float *out, int64_t ldo, const uint8_t *w, int64_t rb,
                                                int64_t lo, int64_t hi, const uint8_t *act, int64_t arb, int64_t n,
                                                int64_t nb) {
	for (int64_t r = lo; r < hi; r++)
		for (int64_t j = 0; j < n; j++) out[j * ldo + r] = dot(w + r * rb, act + j * arb, nb);
}

#endif
