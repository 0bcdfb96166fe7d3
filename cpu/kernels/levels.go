package kernels

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/klauspost/cpuid/v2"
)

// libFS holds the libraries `make kernels` built for this architecture (none
// after a plain `go build`: lib/ then only has its README).
//
//go:embed lib
var libFS embed.FS

// EnvVar names the environment variable that forces a level.
const EnvVar = "DOVETAIL_KERNELS"

// nativeLevels are the C levels of this architecture, best first.
func nativeLevels() []string {
	switch runtime.GOARCH {
	case "amd64":
		return []string{"amx", "avx512", "avxvnni", "avx2", "generic"}
	case "arm64":
		return []string{"neon", "generic"}
	}
	return nil
}

// cpuSupports reports whether this CPU runs the code of a level. The
// requirements match the compiler flags in the Makefile: x86-64-v3 is AVX2,
// FMA, F16C, BMI1/2, LZCNT and MOVBE, and avxvnni adds AVX-VNNI's ymm
// vpdpbusd; x86-64-v4 adds AVX-512 F/BW/CD/DQ/VL, and the avx512 level also
// needs VNNI for its int8 dot products.
func cpuSupports(level string) bool {
	switch runtime.GOARCH + "/" + level {
	case "amd64/generic", "arm64/generic":
		return true
	case "amd64/avx2":
		return cpuid.CPU.X64Level() >= 3
	case "amd64/avxvnni":
		return cpuid.CPU.X64Level() >= 3 && cpuid.CPU.Supports(cpuid.AVXVNNI)
	case "amd64/avx512":
		return cpuid.CPU.X64Level() >= 4 && cpuid.CPU.Supports(cpuid.AVX512VNNI)
	case "amd64/amx":
		return cpuSupports("avx512") && cpuid.CPU.Supports(cpuid.AMXTILE, cpuid.AMXINT8)
	case "arm64/neon":
		return cpuid.CPU.Supports(cpuid.ASIMD, cpuid.ASIMDDP)
	}
	return false
}

// libName is the file name `make kernels` gives a level's library.
func libName(level string) string {
	if level == "amx" {
		level = "avx512" // the avx512 library with its AMX tiles enabled
	}
	return fmt.Sprintf("libdovetail-%s-%s.so", level, runtime.GOARCH)
}

// embedded returns a level's library, or nil if it was not built.
func embedded(level string) []byte {
	b, err := fs.ReadFile(libFS, "lib/"+libName(level))
	if err != nil {
		return nil
	}
	return b
}

var (
	loadMu sync.Mutex
	loaded = map[string]loadResult{}
)

type loadResult struct {
	set *Set
	err error
}

// ByName returns the kernels of one level ("go", "generic", "avx2",
// "avx512", "neon"), or an error if this CPU cannot run it or its library is
// not embedded or fails to load. Libraries are loaded once per process.
func ByName(name string) (*Set, error) {
	if name == "go" {
		return goSet, nil
	}
	known := false
	for _, l := range nativeLevels() {
		known = known || l == name
	}
	if !known {
		return nil, fmt.Errorf("kernels: unknown level %q on %s (levels: go, %s)", name, runtime.GOARCH, strings.Join(nativeLevels(), ", "))
	}
	if !cpuSupports(name) {
		return nil, fmt.Errorf("kernels: this CPU cannot run the %s kernels", name)
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	if r, ok := loaded[name]; ok {
		return r.set, r.err
	}
	var r loadResult
	if data := embedded(name); data == nil {
		r.err = fmt.Errorf("kernels: %s is not built into this binary (run make)", libName(name))
	} else {
		r.set, r.err = loadLevel(name, data)
	}
	loaded[name] = r
	return r.set, r.err
}

// Available lists the levels this machine can use, worst first; it always
// includes "go". Listing a level loads its library.
func Available() []string {
	out := []string{"go"}
	levels := nativeLevels()
	for i := len(levels) - 1; i >= 0; i-- {
		if _, err := ByName(levels[i]); err == nil {
			out = append(out, levels[i])
		}
	}
	return out
}

var best struct {
	once   sync.Once
	set    *Set
	err    error
	notice string
}

// Best returns the kernels to use: the level DOVETAIL_KERNELS names if it is
// set (an error if that level cannot run here), otherwise the best level the
// CPU supports whose library is embedded and loads, otherwise pure Go. The
// choice is made once per process.
func Best() (*Set, error) {
	best.once.Do(func() { best.set, best.notice, best.err = choose(os.Getenv(EnvVar)) })
	return best.set, best.err
}

// Notice is a one-line description of Best's choice for the application to
// print, such as "kernels: avx512" or "kernels: pure Go (no SIMD library
// built; run make)". The package itself prints nothing.
func Notice() string {
	Best()
	return best.notice
}

// choose implements Best for a given value of DOVETAIL_KERNELS.
func choose(env string) (*Set, string, error) {
	if env != "" {
		s, err := ByName(env)
		if err != nil {
			err = fmt.Errorf("%s=%s: %w", EnvVar, env, err)
			return nil, "kernels: " + err.Error(), err
		}
		return s, fmt.Sprintf("kernels: %s (%s=%s)", describe(s.Name), EnvVar, env), nil
	}
	var failed []error
	built := false
	for _, level := range nativeLevels() {
		if !cpuSupports(level) || embedded(level) == nil {
			continue
		}
		built = true
		s, err := ByName(level)
		if err != nil {
			failed = append(failed, err)
			continue
		}
		n := "kernels: " + describe(level)
		if len(failed) > 0 {
			n += " (" + errors.Join(failed...).Error() + ")"
		}
		return s, strings.ReplaceAll(n, "\n", "; "), nil
	}
	switch {
	case len(failed) > 0:
		return goSet, strings.ReplaceAll("kernels: pure Go ("+errors.Join(failed...).Error()+")", "\n", "; "), nil
	case !built && anyEmbedded():
		return goSet, "kernels: pure Go (no built kernel library runs on this CPU)", nil
	case !built:
		return goSet, "kernels: pure Go (no SIMD library built; run make)", nil
	}
	return goSet, "kernels: pure Go", nil
}

func describe(level string) string {
	if level == "go" {
		return "pure Go"
	}
	return level
}

func anyEmbedded() bool {
	ents, _ := fs.ReadDir(libFS, "lib")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".so") {
			return true
		}
	}
	return false
}
