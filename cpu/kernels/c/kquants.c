// Q4_K and Q6_K weights × Q8_K activations. Both formats have 256-value
// super-blocks with a float scale per super-block and small integer scales
// per sub-block; Q8_K activations carry sums of every 16 quants, which turn
// the formats' offsets (Q4_K's mins, Q6_K's -32) into one small integer dot
// per super-block.
#include "kquants.h"
#include "rows.h"

#if defined(DT_AVX512)

// The k-quant tiles follow tile512.h's scheme, except that the unpacked,
// transposed weights of a super-block (64 zmm) cannot all stay in
// registers: they are staged on the stack, where L1 serves them to every
// activation row. Sub-block scales multiply in float per lane; the offsets
// go through vpdpwssd of the per-lane mins (or scales) with the
// activations' 16-value sums.

// With one or two activation rows a super-block is done 64 values at a
// time straight from registers: the loop body stays short enough for the
// out-of-order core to overlap one chunk's transpose with the previous
// chunk's products. With more rows the unpacked weights are staged once
// and reused from L1 by every row.
#define KREG 2

// k45_tile is the Q4_K tile and, with Q5 set, Q5_K's: the same header and
// scales, the low nibbles at byte 48 rather than 16, and a fifth bit per
// value from qh (bytes 16..47, bit 2k of qh[l] for value 64k+l, bit 2k+1
// for value 64k+32+l), ORed in as 16 from a byte mask.

DT_INLINE void k45_tile(const int NT, const int Q5, const uint8_t *w, int64_t rb, int rows, int64_t nb,
                        const uint8_t *act, int64_t arb, float *out, int64_t ldo) {
	const int bsize = Q5 ? Q5_K_SIZE : Q4_K_SIZE, qoff = Q5 ? 48 : 16;
	const uint8_t *p[16];
	const __m512i vidx = tile_rows(w, rb, rows, p);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512 acc[16];
	__m512i W[64], mp[8];
	__m512 scf[8];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const int64_t o = b * bsize;
		prefetch_rows(p, o, bsize);
		const __m512i hdr = _mm512_i32gather_epi32(vidx, w + o, 1);
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hdr));
		const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(hdr, 16)));
		const __m512i A = _mm512_i32gather_epi32(vidx, w + o + 4, 1);
		const __m512i B = _mm512_i32gather_epi32(vidx, w + o + 8, 1);
		const __m512i C = _mm512_i32gather_epi32(vidx, w + o + 12, 1);
		__m512 t[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) t[j] = _mm512_setzero_ps();
		__m512i Th[8]; // Q5_K: qh transposed, four bytes of a row per lane
		if (Q5) transpose32(p, o + 16, Th);
		if (NT <= KREG) {
			#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				__m512i T[8], Wk[8], sc0, sc1, m;
				transpose32(p, o + qoff + 32 * k, T);
				q4k_scales(2 * k, A, B, C, &sc0, &m);
				q4k_scales(2 * k + 1, A, B, C, &sc1, &m);
				const __m512 f0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc0)), f1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc1));
				#pragma GCC unroll 8
				for (int g = 0; g < 8; g++) {
					Wk[g] = _mm512_and_si512(T[g], m4);
					if (Q5) Wk[g] = _mm512_or_si512(Wk[g], q5_high(Th[g], 2 * k));
				}
				#pragma GCC unroll 4
				for (int j = 0; j < NT; j++) {
					__m512i S = dot8(_mm512_setzero_si512(), Wk, act + j * arb + b * Q8_K_SIZE + 4 + 64 * k);
					t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), f0, t[j]);
				}
				#pragma GCC unroll 8
				for (int g = 0; g < 8; g++) {
					Wk[g] = _mm512_and_si512(_mm512_srli_epi16(T[g], 4), m4);
					if (Q5) Wk[g] = _mm512_or_si512(Wk[g], q5_high(Th[g], 2 * k + 1));
				}
				#pragma GCC unroll 4
				for (int j = 0; j < NT; j++) {
					__m512i S = dot8(_mm512_setzero_si512(), Wk, act + j * arb + b * Q8_K_SIZE + 4 + 64 * k + 32);
					t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), f1, t[j]);
				}
			}
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++) {
				__m512i sc, m;
				q4k_scales(s, A, B, C, &sc, &m);
				mp[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
			}
		} else {
			#pragma GCC unroll 16
			for (int s = 0; s < 8; s++) {
				__m512i sc, m;
				q4k_scales(s, A, B, C, &sc, &m);
				scf[s] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
				mp[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
			}
			#pragma GCC unroll 16
			for (int k = 0; k < 4; k++) {
				__m512i T[8];
				transpose32(p, o + qoff + 32 * k, T);
				#pragma GCC unroll 16
				for (int g = 0; g < 8; g++) {
					W[16 * k + g] = _mm512_and_si512(T[g], m4);
					W[16 * k + 8 + g] = _mm512_and_si512(_mm512_srli_epi16(T[g], 4), m4);
					if (Q5) {
						W[16 * k + g] = _mm512_or_si512(W[16 * k + g], q5_high(Th[g], 2 * k));
						W[16 * k + 8 + g] = _mm512_or_si512(W[16 * k + 8 + g], q5_high(Th[g], 2 * k + 1));
					}
				}
			}
			// Each sub-block's weights are loaded from the stage once and
			// serve every activation row, four rows interleaved; dy folds
			// into the scale so that no per-row partial sum is live.
			#pragma GCC unroll 1
			for (int s = 0; s < 8; s++) {
				__m512i Ws[8];
				#pragma GCC unroll 8
				for (int g = 0; g < 8; g++) Ws[g] = W[8 * s + g];
				#pragma GCC unroll 4
				for (int j = 0; j + 4 <= NT; j += 4) {
					__m512i S[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
					dot8x4(S, Ws, act + j * arb + b * Q8_K_SIZE + 4 + 32 * s, arb);
					#pragma GCC unroll 4
					for (int i = 0; i < 4; i++) {
						const __m512 f = _mm512_mul_ps(scf[s], _mm512_set1_ps(ldf(act + (j + i) * arb + b * Q8_K_SIZE)));
						acc[j + i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[i]), f, acc[j + i]);
					}
				}
				#pragma GCC unroll 4
				for (int j = NT / 4 * 4; j < NT; j++) {
					__m512i S = dot8(_mm512_setzero_si512(), Ws, act + j * arb + b * Q8_K_SIZE + 4 + 32 * s);
					const __m512 f = _mm512_mul_ps(scf[s], _mm512_set1_ps(ldf(act + j * arb + b * Q8_K_SIZE)));
					acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), f, acc[j]);
				}
			}
		}
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m512i mi = _mm512_setzero_si512();
			#pragma GCC unroll 16
			for (int s = 0; s < 8; s++) mi = _mm512_dpwssd_epi32(mi, mp[s], _mm512_set1_epi32(ld32(y + 260 + 4 * s)));
			const __m512 dy = _mm512_set1_ps(ldf(y));
			if (NT <= KREG) {
				t[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), dmin, t[j]);
				acc[j] = _mm512_fmadd_ps(t[j], dy, acc[j]);
			} else {
				acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi), _mm512_mul_ps(dmin, dy), acc[j]);
			}
		}
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

DT_INLINE void q4_k_tile(const int NT, const uint8_t *w, int64_t rb, int rows, int64_t nb, const uint8_t *act,
                         int64_t arb, float *out, int64_t ldo) {
	k45_tile(NT, 0, w, rb, rows, nb, act, arb, out, ldo);
}

DT_INLINE void q5_k_tile(const int NT, const uint8_t *w, int64_t rb, int rows, int64_t nb, const uint8_t *act,
                         int64_t arb, float *out, int64_t ldo) {
	k45_tile(NT, 1, w, rb, rows, nb, act, arb, out, ldo);
}

DT_INLINE void q6_k_tile(const int NT, const uint8_t *w, int64_t rb, int rows, int64_t nb, const uint8_t *act,
                         int64_t arb, float *out, int64_t ldo) {
	const uint8_t *p[16];
	const __m512i vidx = tile_rows(w, rb, rows, p);
	__m512 acc[16];
	__m512i W[64], cp[8];
	__m512 scf[16];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const int64_t o = b * Q6_K_SIZE;
		prefetch_rows(p, o, Q6_K_SIZE);
		// d is the last two bytes of the block: gather from 206 so as not to
		// read past the end of the tensor.
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_i32gather_epi32(vidx, w + o + 206, 1), 16)));
		__m512i sc[16];
		#pragma GCC unroll 4
		for (int i = 0; i < 4; i++) {
			const __m512i G = _mm512_i32gather_epi32(vidx, w + o + 192 + 4 * i, 1);
			sc[4 * i + 0] = _mm512_srai_epi32(_mm512_slli_epi32(G, 24), 24);
			sc[4 * i + 1] = _mm512_srai_epi32(_mm512_slli_epi32(G, 16), 24);
			sc[4 * i + 2] = _mm512_srai_epi32(_mm512_slli_epi32(G, 8), 24);
			sc[4 * i + 3] = _mm512_srai_epi32(G, 24);
		}
		#pragma GCC unroll 16
		for (int i = 0; i < 16; i++) scf[i] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc[i]));
		#pragma GCC unroll 8
		for (int u = 0; u < 8; u++)
			cp[u] = _mm512_or_si512(_mm512_and_si512(sc[2 * u], _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(sc[2 * u + 1], 16));
		__m512 t[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) t[j] = _mm512_setzero_ps();
		#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			__m512i Th[8];
			transpose32(p, o + 128 + 32 * h, Th);
			#pragma GCC unroll 2
			for (int half = 0; half < 2; half++) { // ql[0..31] (quarters 0, 2), ql[32..63] (1, 3)
				__m512i Tq[8];
				transpose32(p, o + 64 * h + 32 * half, Tq);
				#pragma GCC unroll 2
				for (int up = 0; up < 2; up++) {
					const int qi = half + 2 * up;
					if (NT <= KREG) {
						__m512i Wq[8];
						#pragma GCC unroll 8
						for (int g = 0; g < 8; g++) Wq[g] = q6_quant(qi, Tq[g], Th[g]);
						#pragma GCC unroll 4
						for (int j = 0; j < NT; j++) {
							const uint8_t *y = act + j * arb + b * Q8_K_SIZE + 4 + 128 * h + 32 * qi;
							#pragma GCC unroll 2
							for (int e = 0; e < 2; e++) { // the quarter's two 16-value sub-blocks
								__m512i S = _mm512_setzero_si512(), S1 = _mm512_setzero_si512();
								S = _mm512_dpbusd_epi32(S, Wq[4 * e + 0], _mm512_set1_epi32(ld32(y + 16 * e + 0)));
								S1 = _mm512_dpbusd_epi32(S1, Wq[4 * e + 1], _mm512_set1_epi32(ld32(y + 16 * e + 4)));
								S = _mm512_dpbusd_epi32(S, Wq[4 * e + 2], _mm512_set1_epi32(ld32(y + 16 * e + 8)));
								S1 = _mm512_dpbusd_epi32(S1, Wq[4 * e + 3], _mm512_set1_epi32(ld32(y + 16 * e + 12)));
								t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(S, S1)), scf[8 * h + 2 * qi + e], t[j]);
							}
						}
					} else {
						#pragma GCC unroll 8
						for (int g = 0; g < 8; g++) W[32 * h + 8 * qi + g] = q6_quant(qi, Tq[g], Th[g]);
					}
				}
			}
		}
		if (NT > KREG) {
			#pragma GCC unroll 1
			for (int i = 0; i < 16; i++) {
				const __m512i W0 = W[4 * i], W1 = W[4 * i + 1], W2 = W[4 * i + 2], W3 = W[4 * i + 3];
				#pragma GCC unroll 16
				for (int j = 0; j < NT; j++) {
					const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
					const uint8_t *x = y + 4 + 16 * i;
					__m512i S = _mm512_setzero_si512(), S1 = _mm512_setzero_si512();
					S = _mm512_dpbusd_epi32(S, W0, _mm512_set1_epi32(ld32(x)));
					S1 = _mm512_dpbusd_epi32(S1, W1, _mm512_set1_epi32(ld32(x + 4)));
					S = _mm512_dpbusd_epi32(S, W2, _mm512_set1_epi32(ld32(x + 8)));
					S1 = _mm512_dpbusd_epi32(S1, W3, _mm512_set1_epi32(ld32(x + 12)));
					const __m512 f = _mm512_mul_ps(scf[i], _mm512_set1_ps(ldf(y)));
					acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(S, S1)), f, acc[j]);
				}
			}
		}
		const __m512 d32 = _mm512_mul_ps(d, _mm512_set1_ps(32));
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m512i ci = _mm512_setzero_si512();
			#pragma GCC unroll 8
			for (int u = 0; u < 8; u++) ci = _mm512_dpwssd_epi32(ci, cp[u], _mm512_set1_epi32(ld32(y + 260 + 4 * u)));
			const __m512 dy = _mm512_set1_ps(ldf(y));
			if (NT <= KREG) {
				t[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ci), d32, t[j]);
				acc[j] = _mm512_fmadd_ps(t[j], dy, acc[j]);
			} else {
				acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ci), _mm512_mul_ps(d32, dy), acc[j]);
			}
		}
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

// iq4_xs_tile: IQ4_XS's indices look up table values plus 128 (unsigned,
// for vpdpbusd) with a byte shuffle of the transposed nibbles
// (iq4_xs_weights); the 128 comes off through the activations' 16-value
// sums times each sub-block's scale, as Q6_K's 32 does.
DT_INLINE void iq4_xs_tile(const int NT, const uint8_t *w, int64_t rb, int rows, int64_t nb, const uint8_t *act,
                           int64_t arb, float *out, int64_t ldo) {
	const uint8_t *p[16];
	const __m512i vidx = tile_rows(w, rb, rows, p);
	const __m512i table = iq4_table();
	__m512 acc[16];
	__m512i W[64], cp[8];
	__m512 scf[8];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const int64_t o = b * IQ4_XS_SIZE;
		prefetch_rows(p, o, IQ4_XS_SIZE);
		const __m512i hdr = _mm512_i32gather_epi32(vidx, w + o, 1); // d, scales_h
		const __m512i L = _mm512_i32gather_epi32(vidx, w + o + 4, 1); // scales_l
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hdr));
		#pragma GCC unroll 8
		for (int s = 0; s < 8; s++) {
			const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(L, 4 * s), _mm512_set1_epi32(15));
			const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(hdr, 16 + 2 * s), _mm512_set1_epi32(3));
			const __m512i sc = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
			scf[s] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
			cp[s] = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(sc, 16));
		}
		__m512 t[16];
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) t[j] = _mm512_setzero_ps();
		#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			__m512i T[8];
			transpose32(p, o + 8 + 32 * k, T);
			#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) {
				const int s = 2 * k + h;
				if (NT <= KREG) {
					__m512i Ws[8];
					iq4_xs_weights(T, h, table, Ws);
					#pragma GCC unroll 4
					for (int j = 0; j < NT; j++) {
						__m512i S = dot8(_mm512_setzero_si512(), Ws, act + j * arb + b * Q8_K_SIZE + 4 + 32 * s);
						t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), scf[s], t[j]);
					}
				} else {
					iq4_xs_weights(T, h, table, W + 8 * s);
				}
			}
		}
		if (NT > KREG) {
			#pragma GCC unroll 1
			for (int s = 0; s < 8; s++) {
				__m512i Ws[8];
				#pragma GCC unroll 8
				for (int g = 0; g < 8; g++) Ws[g] = W[8 * s + g];
				#pragma GCC unroll 4
				for (int j = 0; j + 4 <= NT; j += 4) {
					__m512i S[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
					dot8x4(S, Ws, act + j * arb + b * Q8_K_SIZE + 4 + 32 * s, arb);
					#pragma GCC unroll 4
					for (int i = 0; i < 4; i++) t[j + i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[i]), scf[s], t[j + i]);
				}
				#pragma GCC unroll 4
				for (int j = NT / 4 * 4; j < NT; j++) {
					__m512i S = dot8(_mm512_setzero_si512(), Ws, act + j * arb + b * Q8_K_SIZE + 4 + 32 * s);
					t[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), scf[s], t[j]);
				}
			}
		}
		const __m512 d128 = _mm512_mul_ps(d, _mm512_set1_ps(128));
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m512i ci = _mm512_setzero_si512();
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++) ci = _mm512_dpwssd_epi32(ci, cp[s], _mm512_set1_epi32(ld32(y + 260 + 4 * s)));
			t[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ci), d128, t[j]);
			acc[j] = _mm512_fmadd_ps(t[j], _mm512_set1_ps(ldf(y)), acc[j]);
		}
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) store_tile(out + j * ldo, rows, acc[j], 0);
}

typedef void (*ktile_fn)(const uint8_t *w, int64_t rb, int rows, int64_t nb, const uint8_t *act, int64_t arb,
                         float *out, int64_t ldo);

#define KTILE_FN(name, NT)                                                                                   \
	static void name##_##NT(const uint8_t *w, int64_t rb, int rows, int64_t nb, const uint8_t *act,         \
	                        int64_t arb, float *out, int64_t ldo) {                                          \
		name(NT, w, rb, rows, nb, act, arb, out, ldo);                                                       \
	}
#define KTILE_FNS(name) NT_VARIANTS(KTILE_FN, ktile_fn, name, name##_tiles)

KTILE_FNS(q4_k_tile)
KTILE_FNS(q5_k_tile)
KTILE_FNS(q6_k_tile)
KTILE_FNS(iq4_xs_tile)

static void k_matmul(ktile_fn const tiles[17], float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo,
                     int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	for (int64_t r0 = lo; r0 < hi; r0 += 16) {
		const int rows = hi - r0 < 16 ? (int)(hi - r0) : 16;
		for (int64_t j0 = 0; j0 < n; j0 += 16) {
			const int nt = n - j0 < 16 ? (int)(n - j0) : 16;
			tiles[nt](w + r0 * rb, rb, rows, cols / QKK, act + j0 * arb, arb, out + j0 * ldo + r0, ldo);
		}
	}
}

#elif defined(DT_AVX2)

// One weight row against up to four activation rows, after ggml's AVX2
// kernels: maddubs for nibble × int8, madd to apply the sub-block scale
// (taken from the unpacked scales by a shuffle), and the mins' products
// kept in vector lanes until the row ends.
DT_INLINE void q4_k_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	__m256 acc[4], accm[4];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps(), accm[j] = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q4_K_SIZE;
		const float d = f16_to_f32(ld16(wb)), dmin = f16_to_f32(ld16(wb + 2));
		__m128i sc8;
		__m256i mins;
		k4_scales(wb + 4, &sc8, &mins);
		__m256i scale[8];
		k4_scale_lanes(sc8, scale);
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m256i sumi = _mm256_setzero_si256();
			#pragma GCC unroll 16
			for (int k = 0; k < 4; k++) {
				const __m256i raw = _mm256_loadu_si256((const __m256i *)(wb + 16 + 32 * k));
				__m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(raw, m4), _mm256_loadu_si256((const __m256i *)(y + 4 + 64 * k)));
				__m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
				                                  _mm256_loadu_si256((const __m256i *)(y + 4 + 64 * k + 32)));
				p0 = _mm256_madd_epi16(p0, scale[2 * k]);
				p1 = _mm256_madd_epi16(p1, scale[2 * k + 1]);
				sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
			}
			const float dy = ldf(y);
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), _mm256_cvtepi32_ps(sumi), acc[j]);
			const __m256i mi = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)(y + 4 + QKK)));
			accm[j] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * dy), _mm256_cvtepi32_ps(mi), accm[j]);
		}
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]) - hsum256(accm[j]);
}

DT_INLINE void q6_k_row(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                        int64_t nb) {
	__m256 acc[4], accm[4];
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps(), accm[j] = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q6_K_SIZE;
		const float d = f16_to_f32(ld16(wb + 208));
		__m256i q[8], scv[8];
		for (int h = 0; h < 2; h++) {
			const __m256i a = _mm256_loadu_si256((const __m256i *)(wb + 64 * h));
			const __m256i c = _mm256_loadu_si256((const __m256i *)(wb + 64 * h + 32));
			const __m256i hb = _mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * h));
			q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
			q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
			q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m30));
			q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
			                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
		}
		// The 16 int8 scales: quarter i's pair (2i, 2i+1) by a shuffle
		// each; all 16 for the offsets' sums.
		const __m128i sc = _mm_loadu_si128((const __m128i *)(wb + 192));
		#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) scv[i] = i8_pair16(sc, i);
		const __m256i scw = _mm256_cvtepi8_epi16(sc);
		#pragma GCC unroll 16
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			__m256i sumi = _mm256_setzero_si256();
			#pragma GCC unroll 16
			for (int i = 0; i < 8; i++) {
				__m256i pr = _mm256_maddubs_epi16(q[i], _mm256_loadu_si256((const __m256i *)(y + 4 + 32 * i)));
				sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pr, scv[i]));
			}
			const __m256i ci = _mm256_madd_epi16(scw, _mm256_loadu_si256((const __m256i *)(y + 4 + QKK)));
			const float dd = d * ldf(y);
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), acc[j]);
			accm[j] = _mm256_fmadd_ps(_mm256_set1_ps(dd * 32), _mm256_cvtepi32_ps(ci), accm[j]);
		}
	}
	#pragma GCC unroll 16
	for (int j = 0; j < NT; j++) out[j * ldo] = hsum256(acc[j]) - hsum256(accm[j]);
}

ROW_FNS(q4_k_row)
ROW_FNS(q6_k_row)

static void k_matmul(row_fn const rows[5], float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo,
                     int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	rows_matmul(rows, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
}

#elif defined(DT_NEON)

// One weight row against up to four activation rows: sdot per 16 values,
// the sub-block scales applied in int32 (vmlaq_n_s32), one float multiply
// per super-block.
DT_INLINE void q4_k_neon(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                         int64_t nb) {
	float32x4_t acc[4];
	float accm[4] = {0};
	for (int j = 0; j < NT; j++) acc[j] = vdupq_n_f32(0);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q4_K_SIZE;
		const float d = f16_to_f32(ld16(wb)), dmin = f16_to_f32(ld16(wb + 2));
		uint8_t sc[8], m[8];
		for (int s = 0; s < 8; s++) scale_min_k4(s, wb + 4, &sc[s], &m[s]);
		int32x4_t isum[4];
		for (int j = 0; j < NT; j++) isum[j] = vdupq_n_s32(0);
		for (int k = 0; k < 4; k++) {
			const uint8x16_t a0 = vld1q_u8(wb + 16 + 32 * k), a1 = vld1q_u8(wb + 32 + 32 * k);
			const int8x16_t l0 = vreinterpretq_s8_u8(vandq_u8(a0, vdupq_n_u8(0x0f)));
			const int8x16_t l1 = vreinterpretq_s8_u8(vandq_u8(a1, vdupq_n_u8(0x0f)));
			const int8x16_t h0 = vreinterpretq_s8_u8(vshrq_n_u8(a0, 4)), h1 = vreinterpretq_s8_u8(vshrq_n_u8(a1, 4));
			for (int j = 0; j < NT; j++) {
				const int8_t *y = (const int8_t *)(act + j * arb + b * Q8_K_SIZE + 4 + 64 * k);
				int32x4_t sl = vdotq_s32(vdotq_s32(vdupq_n_s32(0), l0, vld1q_s8(y)), l1, vld1q_s8(y + 16));
				int32x4_t sh = vdotq_s32(vdotq_s32(vdupq_n_s32(0), h0, vld1q_s8(y + 32)), h1, vld1q_s8(y + 48));
				isum[j] = vmlaq_n_s32(vmlaq_n_s32(isum[j], sl, sc[2 * k]), sh, sc[2 * k + 1]);
			}
		}
		for (int j = 0; j < NT; j++) {
			const uint8_t *y = act + j * arb + b * Q8_K_SIZE;
			int16_t bs[16];
			memcpy(bs, y + 4 + QKK, sizeof bs);
			int32_t mins = 0;
			for (int s = 0; s < 8; s++) mins += m[s] * (bs[2 * s] + bs[2 * s + 1]);
			const float dy = ldf(y);
			acc[j] = vfmaq_n_f32(acc[j], vcvtq_f32_s32(isum[j]), d * dy);
			accm[j] += dmin * dy * (float)mins;
		}
	}
	for (int j = 0; j < NT; j++) out[j * ldo] = vaddvq_f32(acc[j]) - accm[j];
}

DT_INLINE void q6_k_neon(const int NT, float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb,
                         int64_t nb) {
	float32x4_t acc[4];
	for (int j = 0; j < NT; j++) acc[j] = vdupq_n_f32(0);
	const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
	const int8x16_t k32 = vdupq_n_s8(32);
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * Q6_K_SIZE;
		const int8_t *sc = (const int8_t *)(wb + 192);
		int32x4_t isum[4];
		for (int j = 0; j < NT; j++) isum[j] = vdupq_n_s32(0);
		for (int h = 0; h < 2; h++) {
			for (int part = 0; part < 2; part++) { // l = 16*part .. 16*part+15
				const uint8x16_t a = vld1q_u8(wb + 64 * h + 16 * part), c = vld1q_u8(wb + 64 * h + 32 + 16 * part);
				const uint8x16_t hb = vld1q_u8(wb + 128 + 32 * h + 16 * part);
				int8x16_t q[4];
				q[0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(a, m4), vandq_u8(vshlq_n_u8(hb, 4), m30))), k32);
				q[1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(c, m4), vandq_u8(vshlq_n_u8(hb, 2), m30))), k32);
				q[2] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(a, 4), vandq_u8(hb, m30))), k32);
				q[3] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(c, 4), vandq_u8(vshrq_n_u8(hb, 2), m30))), k32);
				for (int j = 0; j < NT; j++) {
					const int8_t *y = (const int8_t *)(act + j * arb + b * Q8_K_SIZE + 4 + 128 * h + 16 * part);
					for (int qi = 0; qi < 4; qi++) { // values 128h + 32qi + 16part + 0..15: sub-block 8h + 2qi + part
						int32x4_t s = vdotq_s32(vdupq_n_s32(0), q[qi], vld1q_s8(y + 32 * qi));
						isum[j] = vmlaq_n_s32(isum[j], s, sc[8 * h + 2 * qi + part]);
					}
				}
			}
		}
		const float d = f16_to_f32(ld16(wb + 208));
		for (int j = 0; j < NT; j++)
			acc[j] = vfmaq_n_f32(acc[j], vcvtq_f32_s32(isum[j]), d * ldf(act + j * arb + b * Q8_K_SIZE));
	}
	for (int j = 0; j < NT; j++) out[j * ldo] = vaddvq_f32(acc[j]);
}

typedef void (*krow_fn)(float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb, int64_t nb);
#define KROW(name, NT) \
	static void name##_##NT(float *out, int64_t ldo, const uint8_t *w, const uint8_t *act, int64_t arb, int64_t nb) { name(NT, out, ldo, w, act, arb, nb); }
KROW(q4_k_neon, 1) KROW(q4_k_neon, 2) KROW(q4_k_neon, 3) KROW(q4_k_neon, 4)
KROW(q6_k_neon, 1) KROW(q6_k_neon, 2) KROW(q6_k_neon, 3) KROW(q6_k_neon, 4)
static krow_fn const q4_k_rows[5] = {0, q4_k_neon_1, q4_k_neon_2, q4_k_neon_3, q4_k_neon_4};
static krow_fn const q6_k_rows[5] = {0, q6_k_neon_1, q6_k_neon_2, q6_k_neon_3, q6_k_neon_4};

static void k_matmul(krow_fn const rowfns[5], float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo,
                     int64_t hi, const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	for (int64_t r = lo; r < hi; r++)
		for (int64_t j = 0; j < n; j += 4) {
			const int nt = n - j < 4 ? (int)(n - j) : 4;
			rowfns[nt](out + j * ldo + r, ldo, w + r * rb, act + j * arb, arb, cols / QKK);
		}
}

#else

// The generic dots mirror quant.DotQ4_KQ8_K and quant.DotQ6_KQ8_K.
static float dot_q4_k(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += Q4_K_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		int32_t sumi = 0, mins = 0;
		#pragma GCC unroll 16
		for (int j = 0; j < 4; j++) {
			uint8_t sc1, m1, sc2, m2;
			scale_min_k4(2 * j, w + 4, &sc1, &m1);
			scale_min_k4(2 * j + 1, w + 4, &sc2, &m2);
			const uint8_t *q4 = w + 16 + 32 * j;
			int32_t s1 = 0, s2 = 0;
			for (int l = 0; l < 32; l++) {
				s1 += (q4[l] & 0xf) * q8[64 * j + l];
				s2 += (q4[l] >> 4) * q8[64 * j + 32 + l];
			}
			sumi += sc1 * s1 + sc2 * s2;
			int16_t bs[4];
			memcpy(bs, x + 4 + QKK + 8 * j, 8);
			mins += m1 * (bs[0] + bs[1]) + m2 * (bs[2] + bs[3]);
		}
		const float dy = ldf(x);
		sumf += f16_to_f32(ld16(w)) * dy * (float)sumi - f16_to_f32(ld16(w + 2)) * dy * (float)mins;
	}
	return sumf;
}

static float dot_q6_k(const uint8_t *w, const uint8_t *x, int64_t nb) {
	float sumf = 0;
	for (int64_t b = 0; b < nb; b++, w += Q6_K_SIZE, x += Q8_K_SIZE) {
		const int8_t *q8 = (const int8_t *)(x + 4);
		const int8_t *sc = (const int8_t *)(w + 192);
		int32_t sumi = 0;
		for (int n = 0; n < QKK; n += 128) {
			const uint8_t *ql = w + n / 2, *qh = w + 128 + n / 4;
			for (int l = 0; l < 32; l++) {
				const int is = n / 16 + l / 16;
				const int q1 = (int)((ql[l] & 0xf) | ((qh[l] & 3) << 4)) - 32;
				const int q2 = (int)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
				const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
				const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
				sumi += sc[is] * q1 * q8[n + l] + sc[is + 2] * q2 * q8[n + l + 32] + sc[is + 4] * q3 * q8[n + l + 64] +
				        sc[is + 6] * q4 * q8[n + l + 96];
			}
		}
		sumf += f16_to_f32(ld16(w + 208)) * ldf(x) * (float)sumi;
	}
	return sumf;
}

#endif

DT_API void dt_matmul_q4_k(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX512)
	k_matmul(q4_k_tile_tiles, out, ldo, w, rb, lo, hi, act, arb, n, cols);
#elif defined(DT_AVX2) || defined(DT_NEON)
	k_matmul(q4_k_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols);
#else
	dots_matmul(dot_q4_k, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#endif
}

#if defined(DT_AVX512)
// dt_q5_k_matmul512 is Q5_K's tiles, for dt_matmul_q5_k (q5k.c).
void dt_q5_k_matmul512(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi, const uint8_t *act,
                       int64_t arb, int64_t n, int64_t cols) {
	k_matmul(q5_k_tile_tiles, out, ldo, w, rb, lo, hi, act, arb, n, cols);
}

// dt_iq4_xs_matmul512 is IQ4_XS's tiles, for dt_matmul_iq4_xs (iq4.c).
void dt_iq4_xs_matmul512(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                         const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
	k_matmul(iq4_xs_tile_tiles, out, ldo, w, rb, lo, hi, act, arb, n, cols);
}
#endif

DT_API void dt_matmul_q6_k(float *out, int64_t ldo, const uint8_t *w, int64_t rb, int64_t lo, int64_t hi,
                           const uint8_t *act, int64_t arb, int64_t n, int64_t cols) {
#if defined(DT_AVX512)
	k_matmul(q6_k_tile_tiles, out, ldo, w, rb, lo, hi, act, arb, n, cols);
#elif defined(DT_AVX2) || defined(DT_NEON)
	k_matmul(q6_k_rows, out, ldo, w, rb, lo, hi, act, arb, n, cols);
#else
	dots_matmul(dot_q6_k, out, ldo, w, rb, lo, hi, act, arb, n, cols / QKK);
#endif
}
