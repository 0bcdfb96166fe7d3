//go:build (linux || darwin) && (amd64 || arm64)

package kernels

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"dovetail/quant"
)

// abiVersion must equal DT_ABI_VERSION in common.h: a library built from
// other sources than this package's Go code is refused rather than called
// with arguments it reads differently.
const abiVersion = 27

// cLib holds the entry points of one loaded library. Every C function takes
// integer-class arguments only (floats travel as their bits), because
// purego.SyscallN passes integer registers and calling through it avoids the
// reflection and allocation of purego.RegisterFunc on every call.
type cLib struct {
	quantizeQ8_0, quantizeQ8_K, toF16          uintptr
	mmQ8_0, mmQ4_0, mmQ4_K, mmQ5_K, mmQ6_K     uintptr
	mmIQ4_NL, mmIQ4_XS, mmQ5_0, mmQ4_1, mmQ5_1 uintptr
	mmQ2_K, mmQ3_K, mmIQ3_S, mmIQ3_XXS         uintptr
	mmIQ2_XXS, mmIQ2_XS, mmIQ2_S               uintptr
	mmIQ1_S, mmIQ1_M                           uintptr
	mmF16, mmBF16, mmF32                       uintptr
	rmsnorm, siluMul, attention, abiProbe      uintptr
	packRows, packQ8_0, packQ4_0, packQ5_0     uintptr
	packIQ4_NL, mmPackedIQ4_NL                 uintptr
	packQ4_1, mmPackedQ4_1                     uintptr
	packQ5_1, mmPackedQ5_1                     uintptr
	packBF16, packedScratchless                uintptr
	mmPackedQ8_0, mmPackedQ4_0, mmPackedQ5_0   uintptr
	amxInit                                    uintptr
	packQ4_K, packQ5_K, packQ6_K               uintptr
	mmPackedQ4_K, mmPackedQ5_K, mmPackedQ6_K   uintptr
	packIQ4_XS, mmPackedIQ4_XS                 uintptr
	packQ3_K, mmPackedQ3_K                     uintptr
	packQ2_K, mmPackedQ2_K                     uintptr
	packF16, mmPackedF16, mmPackedBF16         uintptr
	poolNew, poolFree, poolMatMul              uintptr
	poolMatMulRows                             uintptr
	poolAttention, rope                        uintptr
	streamRead, attentionSweep                 uintptr
}

// symbols maps each exported C function to its slot. A library lacking any
// of them is refused as a whole, before anything calls it.
func (l *cLib) symbols() []struct {
	name string
	addr *uintptr
} {
	return []struct {
		name string
		addr *uintptr
	}{
		{"dt_abi_version", &l.abiProbe},
		{"dt_quantize_q8_0", &l.quantizeQ8_0},
		{"dt_quantize_q8_k", &l.quantizeQ8_K},
		{"dt_to_f16", &l.toF16},
		{"dt_matmul_q8_0", &l.mmQ8_0},
		{"dt_matmul_q4_0", &l.mmQ4_0},
		{"dt_matmul_q4_k", &l.mmQ4_K},
		{"dt_matmul_q5_k", &l.mmQ5_K},
		{"dt_matmul_q6_k", &l.mmQ6_K},
		{"dt_matmul_iq4_nl", &l.mmIQ4_NL},
		{"dt_matmul_iq4_xs", &l.mmIQ4_XS},
		{"dt_matmul_q5_0", &l.mmQ5_0},
		{"dt_matmul_q4_1", &l.mmQ4_1},
		{"dt_matmul_q5_1", &l.mmQ5_1},
		{"dt_matmul_q2_k", &l.mmQ2_K},
		{"dt_matmul_q3_k", &l.mmQ3_K},
		{"dt_matmul_iq3_s", &l.mmIQ3_S},
		{"dt_matmul_iq3_xxs", &l.mmIQ3_XXS},
		{"dt_matmul_iq2_xxs", &l.mmIQ2_XXS},
		{"dt_matmul_iq2_xs", &l.mmIQ2_XS},
		{"dt_matmul_iq2_s", &l.mmIQ2_S},
		{"dt_matmul_iq1_s", &l.mmIQ1_S},
		{"dt_matmul_iq1_m", &l.mmIQ1_M},
		{"dt_matmul_f16", &l.mmF16},
		{"dt_matmul_bf16", &l.mmBF16},
		{"dt_matmul_f32", &l.mmF32},
		{"dt_rmsnorm", &l.rmsnorm},
		{"dt_silu_mul", &l.siluMul},
		{"dt_rope", &l.rope},
		{"dt_attention", &l.attention},
		{"dt_attention_sweep", &l.attentionSweep},
		{"dt_pack_rows", &l.packRows},
		{"dt_pack_q8_0", &l.packQ8_0},
		{"dt_pack_q4_0", &l.packQ4_0},
		{"dt_matmul_packed_q8_0", &l.mmPackedQ8_0},
		{"dt_matmul_packed_q4_0", &l.mmPackedQ4_0},
		{"dt_pack_q5_0", &l.packQ5_0},
		{"dt_pack_iq4_nl", &l.packIQ4_NL},
		{"dt_matmul_packed_iq4_nl", &l.mmPackedIQ4_NL},
		{"dt_pack_q4_1", &l.packQ4_1},
		{"dt_matmul_packed_q4_1", &l.mmPackedQ4_1},
		{"dt_pack_q5_1", &l.packQ5_1},
		{"dt_pack_bf16", &l.packBF16},
		{"dt_packed_scratchless", &l.packedScratchless},
		{"dt_matmul_packed_q5_1", &l.mmPackedQ5_1},
		{"dt_matmul_packed_q5_0", &l.mmPackedQ5_0},
		{"dt_pack_q4_k", &l.packQ4_K},
		{"dt_pack_f16", &l.packF16},
		{"dt_matmul_packed_f16", &l.mmPackedF16},
		{"dt_matmul_packed_bf16", &l.mmPackedBF16},
		{"dt_pack_q5_k", &l.packQ5_K},
		{"dt_matmul_packed_q4_k", &l.mmPackedQ4_K},
		{"dt_matmul_packed_q5_k", &l.mmPackedQ5_K},
		{"dt_pack_q6_k", &l.packQ6_K},
		{"dt_matmul_packed_q6_k", &l.mmPackedQ6_K},
		{"dt_pack_iq4_xs", &l.packIQ4_XS},
		{"dt_matmul_packed_iq4_xs", &l.mmPackedIQ4_XS},
		{"dt_pack_q3_k", &l.packQ3_K},
		{"dt_matmul_packed_q3_k", &l.mmPackedQ3_K},
		{"dt_pack_q2_k", &l.packQ2_K},
		{"dt_matmul_packed_q2_k", &l.mmPackedQ2_K},
		{"dt_amx_init", &l.amxInit},
		{"dt_pool_new", &l.poolNew},
		{"dt_pool_free", &l.poolFree},
		{"dt_pool_matmul_packed", &l.poolMatMul},
		{"dt_pool_matmul", &l.poolMatMulRows},
		{"dt_pool_attention", &l.poolAttention},
		{"dt_stream_read", &l.streamRead},
	}
}

// loadLevel writes a level's library to the cache and opens it.
func loadLevel(level string, data []byte) (*Set, error) {
	path, cleanup, err := extract(libName(level), data)
	if err != nil {
		return nil, fmt.Errorf("kernels: %s: %w", level, err)
	}
	l, err := openLib(path)
	cleanup()
	if err != nil {
		return nil, fmt.Errorf("kernels: %s: %w", level, err)
	}
	amx := false
	if level == "amx" {
		// The OS must grant the tile state before the first tile
		// instruction; a kernel that does not is the same as a CPU
		// without AMX.
		if v, _, _ := purego.SyscallN(l.amxInit); v != 1 {
			return nil, fmt.Errorf("kernels: amx: the operating system does not grant the AMX tile state")
		}
		amx = true
	}
	set := l.set(level, amx)
	set.attentionSweep(attentionSweep())
	sum := sha256.Sum256(data)
	set.Build = level + "-" + hex.EncodeToString(sum[:8])
	return set, nil
}

// openLib opens a library and resolves every symbol, so that a missing or
// stale one is an error here rather than a crash in the middle of a forward
// pass.
func openLib(path string) (*cLib, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	l := &cLib{}
	var missing []string
	for _, s := range l.symbols() {
		// Dlsym reports a missing symbol as an error; a zero address
		// without one is just as unusable.
		addr, err := purego.Dlsym(h, s.name)
		if err != nil || addr == 0 {
			missing = append(missing, s.name)
			continue
		}
		*s.addr = addr
	}
	if len(missing) > 0 {
		purego.Dlclose(h)
		return nil, fmt.Errorf("%s lacks %v", filepath.Base(path), missing)
	}
	if v, _, _ := purego.SyscallN(l.abiProbe); v != abiVersion {
		purego.Dlclose(h)
		return nil, fmt.Errorf("%s has ABI version %d, want %d (stale build? run make)", filepath.Base(path), v, abiVersion)
	}
	return l, nil
}

// extract makes data available as a file to dlopen. The preferred place is
// the user cache directory under a name that carries the content hash, so
// that a binary writes its library once and binaries with different builds
// never share a file. Without a usable cache directory the library goes to a
// private temporary directory, which cleanup removes once the library is
// open (the mapping outlives the file).
func extract(name string, data []byte) (path string, cleanup func(), err error) {
	sum := sha256.Sum256(data)
	file := hex.EncodeToString(sum[:12]) + "-" + name
	var errs []error
	if dir, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(dir, "dovetail", "kernels")
		path := filepath.Join(dir, file)
		if err := ensureFile(dir, path, data, sum); err == nil {
			return path, func() {}, nil
		} else {
			errs = append(errs, err)
		}
	}
	dir, err := os.MkdirTemp("", "dovetail-kernels-")
	if err != nil {
		return "", nil, errors.Join(append(errs, err)...)
	}
	path = filepath.Join(dir, file)
	if err := os.WriteFile(path, data, 0o500); err != nil {
		os.RemoveAll(dir)
		return "", nil, errors.Join(append(errs, err)...)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// ensureFile leaves data at path, reusing an existing file only if its
// content hashes to sum. It writes through a temporary file and a rename so
// that processes starting together never open a half-written library.
func ensureFile(dir, path string, data []byte, sum [32]byte) error {
	if old, err := os.ReadFile(path); err == nil {
		if s := sha256.Sum256(old); bytes.Equal(s[:], sum[:]) {
			return nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// p returns the address of a slice's first element for C.
func p[T any](s []T) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s))) }

func f32bits(f float32) uintptr { return uintptr(math.Float32bits(f)) }

// argPool recycles argument arrays: purego.SyscallN's variadic arguments
// escape, so passing them directly would allocate on every kernel call.
var argPool = sync.Pool{New: func() any { return new([15]uintptr) }}

// call runs a C function. The pointers among args come from slices that
// the caller passed to a Set function: those are called through func
// values, so escape analysis has already put whatever they point to on the
// heap, where it does not move; the callers keep the slices alive across
// the call with runtime.KeepAlive.
func call(fn uintptr, args ...uintptr) {
	a := argPool.Get().(*[15]uintptr)
	n := copy(a[:], args)
	purego.SyscallN(fn, a[:n]...)
	argPool.Put(a)
}

// set wraps the library's functions in a Set.
func (l *cLib) set(level string, amx bool) *Set {
	mm := map[quant.Type]uintptr{
		quant.Q8_0: l.mmQ8_0, quant.Q4_0: l.mmQ4_0, quant.Q4_K: l.mmQ4_K, quant.Q5_K: l.mmQ5_K, quant.Q6_K: l.mmQ6_K,
		quant.IQ4_NL: l.mmIQ4_NL, quant.IQ4_XS: l.mmIQ4_XS, quant.Q5_0: l.mmQ5_0, quant.Q4_1: l.mmQ4_1, quant.Q5_1: l.mmQ5_1,
		quant.Q2_K: l.mmQ2_K, quant.Q3_K: l.mmQ3_K, quant.IQ3_S: l.mmIQ3_S, quant.IQ3_XXS: l.mmIQ3_XXS,
		quant.IQ2_XXS: l.mmIQ2_XXS, quant.IQ2_XS: l.mmIQ2_XS, quant.IQ2_S: l.mmIQ2_S,
		quant.IQ1_S: l.mmIQ1_S, quant.IQ1_M: l.mmIQ1_M,
		quant.F16: l.mmF16, quant.BF16: l.mmBF16, quant.F32: l.mmF32,
	}
	var mmTab [quant.BF16 + 1]uintptr // indexed by type: no map lookup per call
	for t, fn := range mm {
		mmTab[t] = fn
	}
	var packing packImpl
	if rows, _, _ := purego.SyscallN(l.packRows); rows > 0 {
		amxArg := uintptr(0)
		if amx {
			amxArg = 1
		}
		packFn := map[quant.Type]uintptr{quant.Q8_0: l.packQ8_0, quant.Q4_0: l.packQ4_0, quant.Q5_0: l.packQ5_0, quant.Q4_K: l.packQ4_K, quant.Q5_K: l.packQ5_K, quant.Q6_K: l.packQ6_K, quant.IQ4_XS: l.packIQ4_XS, quant.Q3_K: l.packQ3_K, quant.Q2_K: l.packQ2_K, quant.F16: l.packF16, quant.BF16: l.packBF16, quant.IQ4_NL: l.packIQ4_NL, quant.Q4_1: l.packQ4_1, quant.Q5_1: l.packQ5_1}
		mmFn := map[quant.Type]uintptr{quant.Q8_0: l.mmPackedQ8_0, quant.Q4_0: l.mmPackedQ4_0, quant.Q5_0: l.mmPackedQ5_0, quant.Q4_K: l.mmPackedQ4_K, quant.Q5_K: l.mmPackedQ5_K, quant.Q6_K: l.mmPackedQ6_K, quant.IQ4_XS: l.mmPackedIQ4_XS, quant.Q3_K: l.mmPackedQ3_K, quant.Q2_K: l.mmPackedQ2_K, quant.F16: l.mmPackedF16, quant.BF16: l.mmPackedBF16, quant.IQ4_NL: l.mmPackedIQ4_NL, quant.Q4_1: l.mmPackedQ4_1, quant.Q5_1: l.mmPackedQ5_1}
		packing = packImpl{
			rows:   int(rows),
			layout: packLayout(level, int(rows)),
			packs:  func(t quant.Type) bool { return packFn[t] != 0 },
			pack: func(t quant.Type, dst, w []byte, rowBytes, rows, cols int) {
				call(packFn[t], p(dst), p(w), uintptr(rowBytes), uintptr(rows), uintptr(cols))
				runtime.KeepAlive(dst)
				runtime.KeepAlive(w)
			},
			matmul: func(t quant.Type, out []float32, ldo int, pw []byte, rows, lo, hi int, act []byte, actRowBytes, n, cols int) {
				call(mmFn[t], p(out), uintptr(ldo), p(pw), uintptr(rows), uintptr(lo), uintptr(hi), p(act),
					uintptr(actRowBytes), uintptr(n), uintptr(cols), amxArg)
				runtime.KeepAlive(out)
				runtime.KeepAlive(pw)
				runtime.KeepAlive(act)
			},
			scratchless: func(on bool) {
				v := uintptr(0)
				if on {
					v = 1
				}
				purego.SyscallN(l.packedScratchless, v)
			},
			threads: func(n int) *threadsImpl {
				h, _, _ := purego.SyscallN(l.poolNew, uintptr(n))
				if h == 0 {
					return nil
				}
				return &threadsImpl{
					matmul: func(t quant.Type, out []float32, ldo int, pw []byte, rows int, act []byte, actRowBytes, n, cols, grain int) {
						call(l.poolMatMul, h, uintptr(t), mmFn[t], p(out), uintptr(ldo), p(pw), uintptr(rows), p(act), uintptr(actRowBytes),
							uintptr(n), uintptr(cols), amxArg, uintptr(grain))
						runtime.KeepAlive(out)
						runtime.KeepAlive(pw)
						runtime.KeepAlive(act)
					},
					plain: func(t quant.Type, out []float32, ldo int, w []byte, rowBytes, rows int, act []byte, actRowBytes, n, cols, grain int) {
						call(l.poolMatMulRows, h, mmTab[t], p(out), uintptr(ldo), p(w), uintptr(rowBytes), uintptr(rows), p(act),
							uintptr(actRowBytes), uintptr(n), uintptr(cols), uintptr(grain))
						runtime.KeepAlive(out)
						runtime.KeepAlive(w)
						runtime.KeepAlive(act)
					},
					attention: attentionCall(l.poolAttention, h),
					free:      func() { purego.SyscallN(l.poolFree, h) },
				}
			},
		}
	}
	return newSet(level, impl{
		packing: packing,
		quantizeQ8_0: func(dst []byte, x []float32) {
			call(l.quantizeQ8_0, p(dst), p(x), uintptr(len(x)))
			runtime.KeepAlive(dst)
			runtime.KeepAlive(x)
		},
		quantizeQ8_K: func(dst []byte, x []float32) {
			call(l.quantizeQ8_K, p(dst), p(x), uintptr(len(x)))
			runtime.KeepAlive(dst)
			runtime.KeepAlive(x)
		},
		toF16: func(dst []uint16, x []float32) {
			call(l.toF16, p(dst), p(x), uintptr(len(x)))
			runtime.KeepAlive(dst)
			runtime.KeepAlive(x)
		},
		matmul: func(t quant.Type, out []float32, ldo int, w []byte, rowBytes, lo, hi int, act []byte, actRowBytes, n, cols int) {
			call(mmTab[t], p(out), uintptr(ldo), p(w), uintptr(rowBytes), uintptr(lo), uintptr(hi), p(act),
				uintptr(actRowBytes), uintptr(n), uintptr(cols))
			runtime.KeepAlive(out)
			runtime.KeepAlive(w)
			runtime.KeepAlive(act)
		},
		rmsnorm: func(out, x, weight []float32, n, cols int, eps float32) {
			call(l.rmsnorm, p(out), p(x), p(weight), uintptr(n), uintptr(cols), f32bits(eps))
			runtime.KeepAlive(out)
			runtime.KeepAlive(x)
			runtime.KeepAlive(weight)
		},
		streamRead: func(b []byte) uint64 {
			r, _, _ := purego.SyscallN(l.streamRead, p(b), uintptr(len(b)))
			runtime.KeepAlive(b)
			return uint64(r)
		},
		siluMul: func(out, gate, up []float32) {
			call(l.siluMul, p(out), p(gate), p(up), uintptr(len(gate)))
			runtime.KeepAlive(out)
			runtime.KeepAlive(gate)
			runtime.KeepAlive(up)
		},
		rope: func(x []float32, heads, hd, pairs int, neox bool, cos, sin []float32) {
			nx := uintptr(0)
			if neox {
				nx = 1
			}
			call(l.rope, p(x), uintptr(heads), uintptr(hd), uintptr(pairs), nx, p(cos), p(sin))
			runtime.KeepAlive(x)
			runtime.KeepAlive(cos)
			runtime.KeepAlive(sin)
		},
		attention: attentionCall(l.attention),
		attentionSweep: func(bytes int64) {
			purego.SyscallN(l.attentionSweep, uintptr(bytes))
		},
	})
}

// attentionCall calls dt_attention, or, given a pool handle,
// dt_pool_attention, which takes the handle before the same arguments.
func attentionCall(fn uintptr, pool ...uintptr) func(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32) {
	return func(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32) {
		if len(pool) == 1 {
			call(fn, pool[0], p(out), p(q), p(kc), p(vc), uintptr(past), uintptr(n), p(mask), uintptr(heads),
				uintptr(kvHeads), uintptr(hd), f32bits(scale), uintptr(jlo), uintptr(jhi), p(scratch))
		} else {
			call(fn, p(out), p(q), p(kc), p(vc), uintptr(past), uintptr(n), p(mask), uintptr(heads),
				uintptr(kvHeads), uintptr(hd), f32bits(scale), uintptr(jlo), uintptr(jhi), p(scratch))
		}
		runtime.KeepAlive(out)
		runtime.KeepAlive(q)
		runtime.KeepAlive(kc)
		runtime.KeepAlive(vc)
		runtime.KeepAlive(mask)
		runtime.KeepAlive(scratch)
	}
}

// packLayout names a level's packed layout: levels with the same name can
// share packed matrices. avxvnni's Q8_0 weights are stored plus 128, so
// its layout is its own though its groups are avx2's.
func packLayout(level string, rows int) string {
	if level == "avxvnni" {
		return fmt.Sprintf("x86-%d-vnni", rows)
	}
	return fmt.Sprintf("x86-%d", rows)
}
