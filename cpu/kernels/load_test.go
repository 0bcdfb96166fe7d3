//go:build (linux || darwin) && (amd64 || arm64)

package kernels

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// buildLib compiles a library exporting the named functions, each returning
// abi, with the C compiler the Makefile uses.
func buildLib(t *testing.T, names []string, abi int) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s): %v", cc, err)
	}
	dir := t.TempDir()
	var src strings.Builder
	for _, n := range names {
		fmt.Fprintf(&src, "long %s(void) { return %d; }\n", n, abi)
	}
	c, so := filepath.Join(dir, "lib.c"), filepath.Join(dir, "lib.so")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	return so
}

func allSymbols() []string {
	var names []string
	for _, s := range (&cLib{}).symbols() {
		names = append(names, s.name)
	}
	return names
}

func TestOpenLibMissingSymbol(t *testing.T) {
	var names []string
	for _, n := range allSymbols() {
		if n != "dt_attention" && n != "dt_matmul_q6_k" {
			names = append(names, n)
		}
	}
	_, err := openLib(buildLib(t, names, abiVersion))
	if err == nil || !strings.Contains(err.Error(), "dt_attention") || !strings.Contains(err.Error(), "dt_matmul_q6_k") {
		t.Fatalf("openLib of a library without dt_attention and dt_matmul_q6_k: err = %v", err)
	}
}

func TestOpenLibABIVersion(t *testing.T) {
	_, err := openLib(buildLib(t, allSymbols(), abiVersion+1))
	if err == nil || !strings.Contains(err.Error(), "ABI version") {
		t.Fatalf("openLib of a library with another ABI version: err = %v", err)
	}
	if _, err := openLib(buildLib(t, allSymbols(), abiVersion)); err != nil {
		t.Fatalf("openLib of a complete library: %v", err)
	}
}

func TestOpenLibNotALibrary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junk.so")
	os.WriteFile(path, []byte("not an ELF file"), 0o644)
	if _, err := openLib(path); err == nil {
		t.Fatal("openLib of a junk file succeeded")
	}
}

func TestExtract(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("HOME", dir)
	data := []byte("library bytes")
	p1, cleanup, err := extract("libdovetail-test.so", data)
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if !strings.HasPrefix(p1, dir) {
		t.Errorf("extracted to %s, not under the cache dir %s", p1, dir)
	}
	if b, err := os.ReadFile(p1); err != nil || string(b) != string(data) {
		t.Fatalf("extracted file: %q, %v", b, err)
	}
	// Same content, same file; other content, another file.
	if p2, _, _ := extract("libdovetail-test.so", data); p2 != p1 {
		t.Errorf("second extract: %s, want %s", p2, p1)
	}
	if p3, _, _ := extract("libdovetail-test.so", []byte("other")); p3 == p1 {
		t.Errorf("different content extracted to the same path %s", p3)
	}
	// A damaged cache file is rewritten.
	os.WriteFile(p1, []byte("damaged"), 0o644)
	if _, _, err := extract("libdovetail-test.so", data); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p1); string(b) != string(data) {
		t.Errorf("damaged cache file not rewritten: %q", b)
	}
	// Without a usable cache directory the library goes to a temporary
	// directory that cleanup removes.
	if runtime.GOOS == "linux" {
		t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "file"))
		os.WriteFile(filepath.Join(dir, "file"), nil, 0o644) // a file where the directory should be
		p4, cleanup, err := extract("libdovetail-test.so", data)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p4); string(b) != string(data) {
			t.Errorf("fallback file: %q", b)
		}
		cleanup()
		if _, err := os.Stat(p4); !os.IsNotExist(err) {
			t.Errorf("fallback file %s not removed: %v", p4, err)
		}
	}
}

func TestChoose(t *testing.T) {
	if s, _, err := choose("go"); err != nil || s != goSet {
		t.Errorf(`choose("go") = %v, %v`, s, err)
	}
	if _, notice, err := choose("sse9"); err == nil || !strings.Contains(notice, "sse9") {
		t.Errorf(`choose("sse9"): err %v, notice %q`, err, notice)
	}
	avail := Available()
	s, notice, err := choose("")
	if err != nil || s.Name != avail[len(avail)-1] || notice == "" {
		t.Errorf(`choose("") = %v, %q, %v; available %v`, s.Name, notice, err, avail)
	}
	for _, name := range avail {
		if s, _, err := choose(name); err != nil || s.Name != name {
			t.Errorf("choose(%q) = %v, %v", name, s, err)
		}
	}
}
