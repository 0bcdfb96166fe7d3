package cudaemu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// emu is the emulator built with testdata/probes.cu, called as the CUDA
// device calls a driver.
type emu struct {
	t       *testing.T
	alloc   func(p *uint64, n uintptr) int32
	free    func(p uint64) int32
	htod    func(dst uint64, src unsafe.Pointer, n uintptr, stream uintptr) int32
	dtoh    func(dst unsafe.Pointer, src uint64, n uintptr, stream uintptr) int32
	getFn   func(f *uintptr, mod uintptr, name string) int32
	launchK func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra uintptr) int32
}

var probes = []string{"warp_sums", "reverse", "reverse_dynamic", "write_past", "read_at", "diverge", "exited_shuffle"}

func newEmu(t *testing.T) *emu {
	abs, err := filepath.Abs("testdata/probes.cu")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := Build(map[string][]string{abs: probes})
	if err != nil {
		if errors.Is(err, ErrNoCompiler) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	e := &emu{t: t}
	purego.RegisterLibFunc(&e.alloc, h, "cuMemAlloc_v2")
	purego.RegisterLibFunc(&e.free, h, "cuMemFree_v2")
	purego.RegisterLibFunc(&e.htod, h, "cuMemcpyHtoDAsync_v2")
	purego.RegisterLibFunc(&e.dtoh, h, "cuMemcpyDtoHAsync_v2")
	purego.RegisterLibFunc(&e.getFn, h, "cuModuleGetFunction")
	purego.RegisterLibFunc(&e.launchK, h, "cuLaunchKernel")
	return e
}

func (e *emu) upload(x []float32) uint64 {
	e.t.Helper()
	var p uint64
	if r := e.alloc(&p, uintptr(4*len(x))); r != 0 {
		e.t.Fatalf("cuMemAlloc: %d", r)
	}
	if r := e.htod(p, unsafe.Pointer(&x[0]), uintptr(4*len(x)), 0); r != 0 {
		e.t.Fatalf("cuMemcpyHtoD: %d", r)
	}
	return p
}

func (e *emu) download(p uint64, n int) []float32 {
	e.t.Helper()
	x := make([]float32, n)
	if r := e.dtoh(unsafe.Pointer(&x[0]), p, uintptr(4*n), 0); r != 0 {
		e.t.Fatalf("cuMemcpyDtoH: %d", r)
	}
	return x
}

// launch runs kernel on grid×block threads with args (uint64: a device
// pointer; int32) and returns the CUresult.
func (e *emu) launch(kernel string, grid, block, shared uint32, args ...any) int32 {
	e.t.Helper()
	var f uintptr
	if r := e.getFn(&f, 0, kernel); r != 0 {
		e.t.Fatalf("cuModuleGetFunction %s: %d", kernel, r)
	}
	vals := make([]uint64, len(args))
	ptrs := make([]unsafe.Pointer, len(args)+1)
	for i, a := range args {
		switch v := a.(type) {
		case uint64:
			vals[i] = v
		case int32:
			vals[i] = uint64(uint32(v))
		}
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	var pin runtime.Pinner
	pin.Pin(&vals[0])
	defer pin.Unpin()
	return e.launchK(f, grid, 1, 1, block, 1, 1, shared, 0, unsafe.Pointer(&ptrs[0]), 0)
}

func iota32(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%97) - 40
	}
	return x
}

// A warp's lanes exchange values as CUDA's shuffles do: xor gives every
// lane the sum, down gives lane 0 the sum and lane l the sum of lanes
// l, l+1, … with offsets that stay in the warp.
func TestWarpShuffles(t *testing.T) {
	e := newEmu(t)
	const n = 128
	x := iota32(n)
	in, out := e.upload(x), e.upload(make([]float32, 2*n))
	if r := e.launch("warp_sums", 2, 64, 0, out, in); r != 0 {
		t.Fatalf("launch: %d", r)
	}
	got := e.download(out, 2*n)
	for i := range n {
		w := i &^ 31
		var sum float32
		for j := w; j < w+32; j++ {
			sum += x[j]
		}
		if got[2*i] != sum {
			t.Errorf("thread %d: xor sum %v, want %v", i, got[2*i], sum)
		}
		// down: v(l) after offsets 16, 8, 4, 2, 1, each adding lane l+o
		// when it is in the warp (else the lane's own value again).
		v := make([]float32, 32)
		copy(v, x[w:w+32])
		for o := 16; o > 0; o >>= 1 {
			nv := make([]float32, 32)
			for l := range 32 {
				src := l
				if l+o < 32 {
					src = l + o
				}
				nv[l] = v[l] + v[src]
			}
			v = nv
		}
		if got[2*i+1] != v[i-w] {
			t.Errorf("thread %d: down sum %v, want %v", i, got[2*i+1], v[i-w])
		}
	}
}

// __syncthreads holds every thread of a block until all arrive: a block
// reverses its values through static and through dynamic shared memory.
func TestBlockBarrier(t *testing.T) {
	e := newEmu(t)
	const block, blocks = 96, 3
	x := iota32(block * blocks)
	in := e.upload(x)
	for _, k := range []string{"reverse", "reverse_dynamic"} {
		out := e.upload(make([]float32, len(x)))
		if r := e.launch(k, blocks, block, 4*block, out, in); r != 0 {
			t.Fatalf("%s: launch: %d", k, r)
		}
		got := e.download(out, len(x))
		for b := range blocks {
			for i := range block {
				if want := x[b*block+block-1-i]; got[b*block+i] != want {
					t.Fatalf("%s: block %d, thread %d: %v, want %v", k, b, i, got[b*block+i], want)
				}
			}
		}
	}
}

// What a GPU would refuse or corrupt, the emulator reports: a write past
// an allocation (on free: CUDA_ERROR_ILLEGAL_ADDRESS), a warp whose lanes
// wait at different barriers or shuffle without all 32 of them
// (CUDA_ERROR_LAUNCH_FAILED), a block of more
// than 1024 threads or shared memory past 48 KiB (CUDA_ERROR_INVALID_VALUE),
// a copy outside an allocation; memory no one wrote reads as NaN.
func TestFaults(t *testing.T) {
	e := newEmu(t)
	var p uint64
	if r := e.alloc(&p, 4*100); r != 0 {
		t.Fatal(r)
	}
	for i, v := range e.download(p, 100) {
		if !math.IsNaN(float64(v)) {
			t.Fatalf("fresh memory: value %d is %v, not NaN", i, v)
		}
	}
	if r := e.launch("write_past", 1, 128, 0, p, int32(100)); r != 0 {
		t.Fatalf("write_past: launch: %d", r)
	}
	if r := e.free(p); r != 700 {
		t.Errorf("free after a write past the end: %d, want 700 (CUDA_ERROR_ILLEGAL_ADDRESS)", r)
	}
	out := e.upload(make([]float32, 64))
	if r := e.launch("diverge", 1, 64, 0, out); r != 719 {
		t.Errorf("diverging barriers: %d, want 719 (CUDA_ERROR_LAUNCH_FAILED)", r)
	}
	if r := e.launch("exited_shuffle", 1, 64, 0, out); r != 719 {
		t.Errorf("a shuffle after half the lanes returned: %d, want 719 (CUDA_ERROR_LAUNCH_FAILED)", r)
	}
	if r := e.launch("warp_sums", 1, 48, 0, out, out); r != 719 {
		t.Errorf("a shuffle in a block of 48 threads: %d, want 719 (CUDA_ERROR_LAUNCH_FAILED)", r)
	}
	if r := e.launch("reverse", 1, 1025, 0, out, out); r != 1 {
		t.Errorf("1025 threads: %d, want 1 (CUDA_ERROR_INVALID_VALUE)", r)
	}
	if r := e.launch("reverse_dynamic", 1, 32, 49<<10, out, out); r != 1 {
		t.Errorf("49 KiB of shared memory: %d, want 1 (CUDA_ERROR_INVALID_VALUE)", r)
	}
	x := make([]float32, 65)
	if r := e.htod(out, unsafe.Pointer(&x[0]), 4*65, 0); r != 1 {
		t.Errorf("a copy of 65 values into 64: %d, want 1 (CUDA_ERROR_INVALID_VALUE)", r)
	}
}

// A kernel that reads past an allocation's canary stops the process at
// that read (here a child test process, which must die of SIGSEGV); a
// read within the allocation does not.
func TestReadPastTheEnd(t *testing.T) {
	if os.Getenv("DOVETAIL_CUDAEMU_READ_PAST") != "" {
		e := newEmu(t)
		var p uint64
		if r := e.alloc(&p, 4*256); r != 0 {
			t.Fatal(r)
		}
		out := e.upload(make([]float32, 1))
		i, _ := strconv.Atoi(os.Getenv("DOVETAIL_CUDAEMU_READ_PAST"))
		if r := e.launch("read_at", 1, 1, 0, out, p, int32(i)); r != 0 {
			t.Fatalf("launch: %d", r)
		}
		return
	}
	newEmu(t) // builds the library once, here
	for _, c := range []struct {
		i     int
		fault bool
	}{{255, false}, {256 + 64, true}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestReadPastTheEnd$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("DOVETAIL_CUDAEMU_READ_PAST=%d", c.i))
		out, err := cmd.CombinedOutput()
		if faulted := err != nil && strings.Contains(string(out), "SIGSEGV"); faulted != c.fault {
			t.Errorf("reading value %d of 256: fault %v, want %v (%v)\n%s", c.i, faulted, c.fault, err, out)
		}
	}
}
