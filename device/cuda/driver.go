package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"dovetail/device"
)

// The CUDA driver API and cuBLAS, reached through purego: no cgo, so one
// binary runs with or without a GPU. The driver (libcuda.so.1) comes with
// NVIDIA's display driver; cuBLAS comes with the CUDA toolkit and is
// optional (a tiled kernel multiplies without it).

// ErrNoDevice says that no CUDA driver or device is present.
var ErrNoDevice = errors.New("no CUDA device")

// cuFn names the driver functions the device calls, in the order of cuLib's
// fields.
var cuFn = []string{
	"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDevicePrimaryCtxRetain",
	"cuCtxSetCurrent", "cuStreamCreate", "cuStreamSynchronize", "cuMemAlloc_v2", "cuMemFree_v2",
	"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD32Async",
	"cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel", "cuGetErrorName", "cuMemGetInfo_v2",
	"cuMemAllocHost_v2", "cuMemFreeHost", "cuStreamDestroy_v2", "cuDeviceGetAttribute",
	"cuDeviceGetPCIBusId", "cuDeviceTotalMem_v2", "cuDriverGetVersion",
}

type cuLib struct {
	init, deviceGetCount, deviceGet, deviceGetName, primaryCtxRetain,
	ctxSetCurrent, streamCreate, streamSynchronize, memAlloc, memFree,
	memcpyHtoD, memcpyDtoH, memcpyDtoD, memsetD32,
	moduleLoadData, moduleGetFunction, launchKernel, getErrorName, memGetInfo,
	memAllocHost, memFreeHost, streamDestroy, deviceGetAttribute,
	deviceGetPCIBusId, deviceTotalMem, driverGetVersion uintptr

	graph *graphLib // nil where the driver has no graphs (before CUDA 11.4)
}

// graphFn names the driver's graph functions (graph.go), in the order of
// graphLib's fields; each versioned name falls back to its first version,
// which reads the same leading fields of a kernel node's parameters.
var graphFn = []string{"cuGraphCreate", "cuGraphAddKernelNode_v2", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
	"cuGraphExecKernelNodeSetParams_v2", "cuGraphExecDestroy", "cuGraphDestroy"}

type graphLib struct {
	create, addKernelNode, instantiate, launch, setParams, execDestroy, destroy uintptr
}

// blasLib is cuBLAS.
type blasLib struct {
	path                              string
	create, setStream, sgemm, destroy uintptr
}

var (
	driversMu sync.Mutex
	drivers   = map[string]*cuLib{}
	driverErr = map[string]error{}
)

// DriverPath is the driver library Open loads: DOVETAIL_LIBCUDA when set
// (a driver outside the loader's path, or the tests' emulator, see
// cudaemu), else libcuda.so.1.
func DriverPath() string {
	if p := os.Getenv("DOVETAIL_LIBCUDA"); p != "" {
		return p
	}
	return "libcuda.so.1"
}

// driver loads the driver library at path once and initializes it.
func driver(path string) (*cuLib, error) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if l, err := drivers[path], driverErr[path]; l != nil || err != nil {
		return l, err
	}
	l, err := loadDriver(path)
	drivers[path], driverErr[path] = l, err
	return l, err
}

func loadDriver(path string) (*cuLib, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot load %s (is NVIDIA's driver installed?): %v", ErrNoDevice, path, err)
	}
	l := &cuLib{}
	fields := unsafe.Slice((*uintptr)(unsafe.Pointer(l)), len(cuFn))
	for i, name := range cuFn {
		if fields[i], err = purego.Dlsym(h, name); err != nil {
			return nil, fmt.Errorf("%w: %s lacks %s (driver too old?)", ErrNoDevice, path, name)
		}
	}
	l.graph = loadGraphs(h)
	if err := l.check("cuInit", l.call(l.init, 0)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	return l, nil
}

// loadGraphs finds the driver's graph functions, or returns nil.
func loadGraphs(h uintptr) *graphLib {
	g := &graphLib{}
	fields := unsafe.Slice((*uintptr)(unsafe.Pointer(g)), len(graphFn))
	for i, name := range graphFn {
		p, err := purego.Dlsym(h, name)
		if v1, ok := strings.CutSuffix(name, "_v2"); ok && err != nil {
			p, err = purego.Dlsym(h, v1)
		}
		if err != nil {
			return nil
		}
		fields[i] = p
	}
	return g
}

// call calls a driver function. Callers convert pointers to uintptr in
// the call expression itself: uintptrescapes then moves what they point to
// to the heap and keeps it alive for the call (a stack variable would move
// when the goroutine's stack grows, and the driver would write to the old
// place).
//
//go:uintptrescapes
func (l *cuLib) call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// check turns a CUresult into an error naming the call.
func (l *cuLib) check(what string, r uintptr) error {
	if r == 0 {
		return nil
	}
	var name *byte
	if l.getErrorName != 0 {
		purego.SyscallN(l.getErrorName, r, uintptr(unsafe.Pointer(&name)))
	}
	if name == nil {
		return fmt.Errorf("%s: CUDA error %d", what, r)
	}
	return fmt.Errorf("%s: %s", what, goString(name))
}

// must panics with a device.Error on a failed call: inside an operation
// there is no error to return.
func (l *cuLib) must(what string, r uintptr) {
	if err := l.check(what, r); err != nil {
		panic(&device.Error{Err: err})
	}
}

func goString(p *byte) string {
	var b []byte
	for ; *p != 0; p = (*byte)(unsafe.Add(unsafe.Pointer(p), 1)) {
		b = append(b, *p)
	}
	return string(b)
}

// blasCandidates are where cuBLAS is looked for: DOVETAIL_CUBLAS first,
// then the loader's path, then the CUDA toolkit's usual homes.
func blasCandidates() []string {
	var c []string
	if p := os.Getenv("DOVETAIL_CUBLAS"); p != "" {
		c = append(c, p)
	}
	names := []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}
	c = append(c, names...)
	for _, dir := range []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/lib/x86_64-linux-gnu"} {
		for _, n := range names {
			c = append(c, filepath.Join(dir, n))
		}
	}
	return c
}

var (
	blasOnce sync.Once
	blas     *blasLib
)

// loadBLAS finds cuBLAS, or returns nil.
func loadBLAS() *blasLib {
	blasOnce.Do(func() {
		if os.Getenv("DOVETAIL_CUBLAS") == "off" {
			return
		}
		for _, path := range blasCandidates() {
			h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
			if err != nil {
				continue
			}
			b := &blasLib{path: path}
			ok := true
			for _, s := range []struct {
				p    *uintptr
				name string
			}{{&b.create, "cublasCreate_v2"}, {&b.setStream, "cublasSetStream_v2"},
				{&b.sgemm, "cublasSgemm_v2"}, {&b.destroy, "cublasDestroy_v2"}} {
				if *s.p, err = purego.Dlsym(h, s.name); err != nil {
					ok = false
				}
			}
			if ok {
				blas = b
				return
			}
			purego.Dlclose(h)
		}
	})
	return blas
}
