package kernels

import "github.com/klauspost/cpuid/v2"

// attentionSweep is how many bytes of a layer's keys and values attention may
// read in address order before its heads read them (dt_attention_sweep,
// c/attention.c), 0 for none. A decode step finds the cache evicted by the
// weights it streamed since the last; on an AMD Zen 5 one sweep in order
// brought it back faster than the heads' strided reads and prefetches did, on
// an Intel Xeon it made attention slower, so AMD cores sweep, up to three
// quarters of their L2, and others do not
// (docs/measurements/kernels-attention-threads.md, "Sweeping the KV cache").
func attentionSweep() int64 {
	if cpuid.CPU.VendorID != cpuid.AMD {
		return 0
	}
	l2 := int64(cpuid.CPU.Cache.L2)
	if l2 <= 0 {
		l2 = 512 << 10
	}
	return l2 / 4 * 3
}
