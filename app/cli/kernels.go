package cli

import (
	"fmt"
	"io"

	"dovetail/cpu/kernels"
)

// checkKernels reports a DOVETAIL_KERNELS choice that cannot run as an
// error, and warns on stderr when no SIMD kernels run (a plain `go build`),
// since everything is then several times slower.
func checkKernels(stderr io.Writer) (string, error) {
	k, err := kernels.Best()
	if err != nil {
		return "", err
	}
	if k.Name == "go" {
		fmt.Fprintln(stderr, "dovetail: "+kernels.Notice())
	}
	return k.Name, nil
}
