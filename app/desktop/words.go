package desktop

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// sentenceCase starts s with a capital, as labels and lines do.
func sentenceCase(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || unicode.IsUpper(r) || !unicode.Is(unicode.Latin, r) {
		return s // τ is a symbol here, not a word to capitalise
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// deviceWords names a device as a user knows it: the CPU ("cpu", and the
// host device whatever its threads and kernels), or the GPU's name
// without the driver's ordinal and library ("cuda:0 (NVIDIA H100, cuBLAS)"
// is "NVIDIA H100").
func deviceWords(dev string) string {
	switch {
	case dev == "" || dev == "cpu" || strings.HasPrefix(dev, "host"):
		return "the CPU"
	case strings.HasPrefix(dev, "cuda:"):
		if _, in, ok := strings.Cut(dev, "("); ok {
			name, _, _ := strings.Cut(in, ",")
			return strings.TrimSuffix(name, ")")
		}
		return "the GPU"
	}
	return dev
}

// placed says where a part of the work runs: "draft on the CPU", or
// "no trainer".
func placed(what, dev string) string {
	if dev == "none" {
		return "no " + what
	}
	return what + " on " + deviceWords(dev)
}
