//go:build !((linux || darwin) && (amd64 || arm64))

package kernels

import (
	"fmt"
	"runtime"
)

// loadLevel fails where purego cannot open the libraries: those platforms
// run the pure-Go kernels.
func loadLevel(level string, data []byte) (*Set, error) {
	return nil, fmt.Errorf("kernels: %s: loading libraries is not supported on %s/%s", level, runtime.GOOS, runtime.GOARCH)
}
