package eagle

import "math"

// RopeFreqs are the factors dividing each RoPE frequency pair of a head
// (θ_j / f_j), as GGUF's rope_freqs.weight holds them: llama3 scaling's
// computed as llama.cpp's convert_hf_to_gguf.py does (from the
// wavelength of each pair against the original context), linear
// scaling's the factor for every pair (dividing the frequencies is
// scaling the positions). nil when the draft has no scaling.
func (c Config) RopeFreqs() []float32 {
	n := c.HeadDim / 2
	s := c.Rope
	switch s.Type {
	case "linear":
		f := make([]float32, n)
		for j := range f {
			f[j] = float32(s.Factor)
		}
		return f
	case "llama3":
		return llama3Factors(float64(c.RopeTheta), c.HeadDim, s)
	}
	return nil
}

// llama3Factors: pairs whose wavelength is under the original context
// over high_freq_factor keep their frequency, those above the context over
// low_freq_factor are divided by factor, and those between are smoothed.
// The converter's loop runs on float32 tensors, so this does its
// arithmetic in float32 too.
func llama3Factors(base float64, dim int, s RopeScaling) []float32 {
	old := float32(s.OriginalContext)
	low, high, factor := float32(s.LowFreqFactor), float32(s.HighFreqFactor), float32(s.Factor)
	lowWavelen, highWavelen := float64(s.OriginalContext)/s.LowFreqFactor, float64(s.OriginalContext)/s.HighFreqFactor
	f := make([]float32, dim/2)
	for j := range f {
		freq := float32(1 / math.Pow(base, float64(float32(2*j)/float32(dim))))
		wavelen := float32(2*math.Pi) / freq
		switch {
		case float64(wavelen) < highWavelen:
			f[j] = 1
		case float64(wavelen) > lowWavelen:
			f[j] = factor
		default:
			smooth := (old/wavelen - low) / (high - low)
			f[j] = 1 / ((1-smooth)/factor + smooth)
		}
	}
	return f
}
