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

// dxrow_fn is a row kernel over Q8_0 activations that takes their block
// scales as floats: dx + j*nb for activation row j, or dx 0 to convert
// them itself.
typedef void (*dxrow_fn)(float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                         const float *dx, int64_t nb);

#define DXROW_FN(name, NT)                                                                                   \
	static void name##_##NT(float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,       \
	                        const float *dx, int64_t nb) {                                                    \
		name(NT, out, ldo, w, act, arb, dx, nb);                                                              \
	}
#define DXROW_FNS(name)                                                                                       \
	DXROW_FN(name, 1) DXROW_FN(name, 2) DXROW_FN(name, 3) DXROW_FN(name, 4)                                   \
	static dxrow_fn const name##s[5] = {0, name##_1, name##_2, name##_3, name##_4};

// dx_rows_matmul is rows_matmul for dxrow_fn kernels: the activation
// scales converted once a product (in chunks of activation rows that fit
// a table of DX_MAX) rather than once a weight row and block; rows of more
// blocks than the table holds convert them in the kernel.
#define DX_MAX 4096
__attribute__((unused)) static void dx_rows_matmul(dxrow_fn const rows[5], float *out, int64_t ldo, const uint8_t *w,
                                                   int64_t rb, int64_t lo, int64_t hi, const uint8_t *act, int64_t arb,
                                                   int64_t n, int64_t nb) {
	float tab[DX_MAX];
	const int fits = nb <= DX_MAX;
	const int64_t jc = !fits ? n : DX_MAX / nb < 256 ? DX_MAX / nb : 256;
	for (int64_t j0 = 0; j0 < n; j0 += jc) {
		const int64_t jn = n - j0 < jc ? n - j0 : jc;
		for (int64_t j = 0; fits && j < jn; j++)
			for (int64_t b = 0; b < nb; b++) tab[j * nb + b] = f16_to_f32(ld16(act + (j0 + j) * arb + b * Q8_0_SIZE));
		for (int64_t r = lo; r < hi; r++)
			for (int64_t j = 0; j < jn; j += 4) {
				const int nt = jn - j < 4 ? (int)(jn - j) : 4;
				rows[nt](out + (j0 + j) * ldo + r, ldo, w + r * rb, act + (j0 + j) * arb, arb, fits ? tab + j * nb : 0, nb);
			}
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
