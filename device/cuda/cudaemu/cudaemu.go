// Package cudaemu builds a CPU stand-in for the CUDA driver library
// (csrc/emu.cpp) with the CUDA device's kernels compiled from their .cu
// sources for the host (csrc/cuda_emu.h), so that the device's tests run where
// no GPU is: its launches, its pointer arithmetic, its kernels' thread
// layouts, barriers and shuffles, against the same references as on a
// GPU. What it cannot show is the GPU's: the PTX as the driver compiles
// it, timing, and races beyond the barriers it models. Nothing is
// measured on it; its device names itself "CUDA emulator on the CPU".
//
// The build needs a C++17 compiler (CXX, else c++) and the sources of
// this repository: it is for tests.
package cudaemu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ErrNoCompiler says that the emulator cannot be built here: there is no
// C++ compiler. Any other error of Build is the emulator's or the
// kernels' own, which a test should not skip past.
var ErrNoCompiler = errors.New("cuda emulator: no C++ compiler")

// emuFiles are the library's own sources, in csrc (a directory without Go
// files: Go refuses C++ beside Go files without cgo).
var emuFiles = []string{"emu.cpp", "cuda_emu.h", "cuda_fp16.h", "emu_register.h"}

// Build compiles the emulator with the kernels of the CUDA device's
// sources (cuda.KernelSources: a source file of package cuda → the
// kernels looked up in it), once per content of its sources (cached under
// the user's cache directory), and returns the library's path.
func Build(kernels map[string][]string) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cuda emulator: cannot find its sources")
	}
	emuDir := filepath.Join(filepath.Dir(self), "csrc")
	srcDir := filepath.Dir(filepath.Dir(self))
	units, key, err := sources(emuDir, srcDir, kernels)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "dovetail", "cudaemu")
	lib := filepath.Join(dir, "libcudaemu-"+key[:16]+".so")
	if _, err := os.Stat(lib); err == nil {
		now := time.Now()
		os.Chtimes(lib, now, now) // in use: see prune
		return lib, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cuda emulator: %w", err)
	}
	prune(dir)
	return lib, compile(lib, emuDir, srcDir, units)
}

// prune removes the libraries of other sources that no test has used for
// a week: each edit of a kernel makes a new one.
func prune(dir string) {
	old, _ := filepath.Glob(filepath.Join(dir, "libcudaemu-*.so"))
	for _, f := range old {
		if fi, err := os.Stat(f); err == nil && time.Since(fi.ModTime()) > 7*24*time.Hour {
			os.Remove(f)
		}
	}
}

// sharedDecl is a kernel's dynamic shared memory, which the host has no
// storage class for: it becomes a pointer to the launch's.
var sharedDecl = regexp.MustCompile(`extern __shared__ (\w+) (\w+)\[\];`)

// sources makes one C++ unit per kernel source (the source, its kernels
// registered) and the key of everything the library is built from.
func sources(emuDir, srcDir string, srcs map[string][]string) (units map[string]string, key string, err error) {
	h := sha256.New()
	for _, f := range emuFiles {
		b, err := os.ReadFile(filepath.Join(emuDir, f))
		if err != nil {
			return nil, "", fmt.Errorf("cuda emulator: %w", err)
		}
		h.Write(b)
	}
	headers, _ := filepath.Glob(filepath.Join(srcDir, "*.h"))
	for _, f := range headers { // what the kernel sources include
		if b, err := os.ReadFile(f); err == nil {
			h.Write([]byte(filepath.Base(f)))
			h.Write(b)
		}
	}
	units = map[string]string{}
	for _, f := range slices.Sorted(maps.Keys(srcs)) {
		path := f
		if !filepath.IsAbs(f) {
			path = filepath.Join(srcDir, f)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("cuda emulator: %w", err)
		}
		var u strings.Builder
		fmt.Fprintf(&u, "#include \"cuda_emu.h\"\n#line 1 %q\n", f)
		u.WriteString(sharedDecl.ReplaceAllString(string(b), "$1 *$2 = ($1 *)emu_dynamic_shared();"))
		u.WriteString("\n#include \"emu_register.h\"\n")
		for _, k := range srcs[f] {
			fmt.Fprintf(&u, "EMU_KERNEL(%s)\n", k)
		}
		unit := strings.TrimSuffix(filepath.Base(f), ".cu") + "_emu.cpp"
		units[unit] = u.String()
		h.Write([]byte(unit + u.String()))
	}
	return units, hex.EncodeToString(h.Sum(nil)), nil
}

// compile builds the library at lib, through a temporary file: test
// binaries of several packages may build it at once.
func compile(lib, emuDir, srcDir string, units map[string]string) error {
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "c++"
	}
	if _, err := exec.LookPath(cxx); err != nil {
		return fmt.Errorf("%w (%s): %v", ErrNoCompiler, cxx, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(lib), "build-")
	if err != nil {
		return fmt.Errorf("cuda emulator: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := []string{"-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,-z,defs", "-w", "-I", emuDir, "-I", srcDir,
		"-o", filepath.Join(tmp, "lib.so"), filepath.Join(emuDir, "emu.cpp"), "-lm"}
	for name, src := range units {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			return fmt.Errorf("cuda emulator: %w", err)
		}
		args = append(args, p)
	}
	if out, err := exec.Command(cxx, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("cuda emulator: %s: %v\n%s", cxx, err, out)
	}
	return os.Rename(filepath.Join(tmp, "lib.so"), lib)
}

// Enabled reports whether tests may run on the emulator where no GPU is:
// unless DOVETAIL_CUDAEMU=off.
func Enabled() bool { return os.Getenv("DOVETAIL_CUDAEMU") != "off" }

// Open opens a device with open on the driver library at real; where
// that finds no GPU (its error wraps noGPU) and Enabled, it builds the
// emulator with kernels and opens that instead (cuBLAS, which needs a
// real GPU, does not start there: the device's own gemm kernel
// multiplies).
// Without a C++ compiler the error is the real driver's, wrapping noGPU
// (a skip); a build that fails is an error of its own (a failure).
func Open[D any](real string, kernels map[string][]string, noGPU error, open func(lib string) (D, error)) (dev D, lib string, emulated bool, err error) {
	dev, err = open(real)
	if !errors.Is(err, noGPU) || !Enabled() {
		return dev, real, false, err
	}
	lib, berr := Build(kernels)
	if errors.Is(berr, ErrNoCompiler) {
		return dev, real, false, fmt.Errorf("%w; %v", err, berr)
	}
	if berr != nil {
		return dev, real, false, berr
	}
	dev, err = open(lib)
	return dev, lib, true, err
}
