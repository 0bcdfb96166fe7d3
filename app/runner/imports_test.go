package runner

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// frontEnds are the packages people run, which only turn flags, requests
// and clicks into runner options.
var frontEnds = []string{"cli", "server", "desktop", "dovetail", "dovetail-desktop"}

// Front ends import no device package (the CPU target, the devices, and
// the model code that runs on them, or below them), tests included:
// devices are the runner's.
func TestFrontEndsImportNoDevice(t *testing.T) {
	checked := 0
	for _, fe := range frontEnds {
		dir := filepath.Join("..", fe)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			if _, serr := os.Stat(dir); serr == nil {
				t.Errorf("%s: no Go files (%v)", dir, err)
			}
			continue
		}
		for _, f := range files {
			checked++
			for _, imp := range imports(t, f) {
				if isDevice(imp) {
					t.Errorf("%s imports %s: a front end reaches devices through the runner", f, imp)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no front-end file checked")
	}
}

// devicePackages are the packages that open or run on a device.
var devicePackages = []string{"dovetail/cpu", "dovetail/device", "dovetail/block", "dovetail/offload", "dovetail/dgf", "dovetail/train"}

// Front ends import no other front end outside their tests: the command
// line and the desktop app start the API server through api.Start, which
// the binaries' mains (the one place they meet) hand them.
func TestFrontEndsImportNoFrontEnd(t *testing.T) {
	for _, fe := range []string{"cli", "server", "desktop"} {
		files, err := filepath.Glob(filepath.Join("..", fe, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", fe, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue // tests wire what the mains wire
			}
			for _, imp := range imports(t, f) {
				for _, other := range []string{"cli", "server", "desktop"} {
					if other != fe && imp == "dovetail/app/"+other {
						t.Errorf("%s imports %s: front ends meet in the mains", f, imp)
					}
				}
			}
		}
	}
}

func isDevice(path string) bool {
	for _, p := range devicePackages {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func imports(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		out = append(out, p)
	}
	return out
}

// The rule's own check sees what it must: a device import is caught.
func TestIsDevice(t *testing.T) {
	for p, want := range map[string]bool{"dovetail/cpu": true, "dovetail/cpu/kernels": true, "dovetail/device": true,
		"dovetail/device/cuda": true, "dovetail/dgf": true, "dovetail/train": true, "dovetail/offload": true,
		"dovetail/block": true, "dovetail/cpus": false, "dovetail/engine": false, "dovetail/app/runner": false,
		"dovetail/models/draft": false} {
		if isDevice(p) != want {
			t.Errorf("isDevice(%q) = %v", p, !want)
		}
	}
}
