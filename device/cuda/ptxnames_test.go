package cuda

import (
	"regexp"
	"testing"
)

// Every kernel the device looks up is in its PTX: one missing would keep
// the device from opening on every GPU, which no test without one sees.
func TestKernelsInPTX(t *testing.T) {
	entries := func(ptx string) map[string]bool {
		m := map[string]bool{}
		for _, e := range regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(`).FindAllStringSubmatch(ptx, -1) {
			m[e[1]] = true
		}
		return m
	}
	for _, c := range []struct {
		file  string
		ptx   string
		names []string
	}{{"kernels.ptx", kernelsPTX, cudaKernels}, {"quant.ptx", quantPTX, quantKernels()}} {
		have := entries(c.ptx)
		for _, n := range c.names {
			if !have[n] {
				t.Errorf("%s has no kernel %s", c.file, n)
			}
		}
		if len(have) != len(c.names) {
			t.Errorf("%s has %d kernels, the device looks up %d", c.file, len(have), len(c.names))
		}
	}
}
