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
	"reflect"
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
//
// A field's tag names its C function; the weight types' kernels are
// resolved from the kernel table (table.go) into arrays indexed by type.
type cLib struct {
	abiProbe          uintptr `c:"dt_abi_version"`
	quantizeQ8_0      uintptr `c:"dt_quantize_q8_0"`
	quantizeQ8_K      uintptr `c:"dt_quantize_q8_k"`
	toF16             uintptr `c:"dt_to_f16"`
	rmsnorm           uintptr `c:"dt_rmsnorm"`
	siluMul           uintptr `c:"dt_silu_mul"`
	rope              uintptr `c:"dt_rope"`
	attention         uintptr `c:"dt_attention"`
	attentionSweep    uintptr `c:"dt_attention_sweep"`
	streamRead        uintptr `c:"dt_stream_read"`
	packRows          uintptr `c:"dt_pack_rows"`
	packedScratchless uintptr `c:"dt_packed_scratchless"`
	amxInit           uintptr `c:"dt_amx_init"`
	poolNew           uintptr `c:"dt_pool_new"`
	poolFree          uintptr `c:"dt_pool_free"`
	poolMatMul        uintptr `c:"dt_pool_matmul_packed"`
	poolMatMulRows    uintptr `c:"dt_pool_matmul"`
	poolAttention     uintptr `c:"dt_pool_attention"`

	// matmul[t] is dt_matmul_<t> for every type of the kernel table;
	// pack[t] and matmulPacked[t] are dt_pack_<t> and
	// dt_matmul_packed_<t> for the packed ones. 0 elsewhere.
	matmul, pack, matmulPacked [typeSlots]uintptr
}

// symbol is an exported C function and the slot its address goes to.
type symbol struct {
	name string
	addr *uintptr
}

// symbols lists every function a library must export: cLib's tagged
// fields, then the kernel table's. A library lacking any of them is
// refused as a whole, before anything calls it.
func (l *cLib) symbols() []symbol {
	var out []symbol
	v := reflect.ValueOf(l).Elem()
	for i := range v.NumField() {
		if name := v.Type().Field(i).Tag.Get("c"); name != "" {
			out = append(out, symbol{name, (*uintptr)(unsafe.Pointer(v.Field(i).UnsafeAddr()))})
		}
	}
	for _, k := range table {
		name := cName(k.t)
		out = append(out, symbol{"dt_matmul_" + name, &l.matmul[k.t]})
		if k.layouts == packable {
			out = append(out, symbol{"dt_pack_" + name, &l.pack[k.t]},
				symbol{"dt_matmul_packed_" + name, &l.matmulPacked[k.t]})
		}
	}
	return out
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
	return newSet(level, impl{
		packing: l.packing(level, amx),
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
			call(l.matmul[t], p(out), uintptr(ldo), p(w), uintptr(rowBytes), uintptr(lo), uintptr(hi), p(act),
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

// packing wraps the library's packed products, or returns the zero
// packImpl where the level packs nothing (dt_pack_rows 0).
func (l *cLib) packing(level string, amx bool) packImpl {
	rows, _, _ := purego.SyscallN(l.packRows)
	if rows == 0 {
		return packImpl{}
	}
	amxArg := uintptr(0)
	if amx {
		amxArg = 1
	}
	return packImpl{
		rows:   int(rows),
		layout: packLayout(level, int(rows)),
		packs:  func(t quant.Type) bool { return int(t) < len(l.pack) && l.pack[t] != 0 },
		pack: func(t quant.Type, dst, w []byte, rowBytes, rows, cols int) {
			call(l.pack[t], p(dst), p(w), uintptr(rowBytes), uintptr(rows), uintptr(cols))
			runtime.KeepAlive(dst)
			runtime.KeepAlive(w)
		},
		matmul: func(t quant.Type, out []float32, ldo int, pw []byte, rows, lo, hi int, act []byte, actRowBytes, n, cols int) {
			call(l.matmulPacked[t], p(out), uintptr(ldo), p(pw), uintptr(rows), uintptr(lo), uintptr(hi), p(act),
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
		threads: func(n int) *threadsImpl { return l.threads(n, amxArg) },
	}
}

// threads starts a C thread pool of n threads and wraps its products, or
// returns nil where the level has none.
func (l *cLib) threads(n int, amxArg uintptr) *threadsImpl {
	h, _, _ := purego.SyscallN(l.poolNew, uintptr(n))
	if h == 0 {
		return nil
	}
	return &threadsImpl{
		// The pool is given the type (for the products over Q8_0
		// activations, which it prepares itself) and the type's packed
		// product (for the others, which it calls).
		matmul: func(t quant.Type, out []float32, ldo int, pw []byte, rows int, act []byte, actRowBytes, n, cols, grain int) {
			call(l.poolMatMul, h, uintptr(t), l.matmulPacked[t], p(out), uintptr(ldo), p(pw), uintptr(rows), p(act),
				uintptr(actRowBytes), uintptr(n), uintptr(cols), amxArg, uintptr(grain))
			runtime.KeepAlive(out)
			runtime.KeepAlive(pw)
			runtime.KeepAlive(act)
		},
		plain: func(t quant.Type, out []float32, ldo int, w []byte, rowBytes, rows int, act []byte, actRowBytes, n, cols, grain int) {
			call(l.poolMatMulRows, h, l.matmul[t], p(out), uintptr(ldo), p(w), uintptr(rowBytes), uintptr(rows), p(act),
				uintptr(actRowBytes), uintptr(n), uintptr(cols), uintptr(grain))
			runtime.KeepAlive(out)
			runtime.KeepAlive(w)
			runtime.KeepAlive(act)
		},
		attention: attentionCall(l.poolAttention, h),
		free:      func() { purego.SyscallN(l.poolFree, h) },
	}
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
