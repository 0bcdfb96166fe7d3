package eagle

// permuteRoPE reorders the rows of a Q or K projection (rows × cols,
// heads heads) from Hugging Face's rotate-half RoPE layout, which pairs
// dimension i with i+d/2 of each head, into llama.cpp's, which pairs 2i
// with 2i+1: as convert_hf_to_gguf.py's permute does,
// w.reshape(heads, 2, d/2, cols).swapaxes(1, 2).reshape(rows, cols).
// Row h·d + 2j + i of the result is row h·d + i·d/2 + j of w.
func permuteRoPE(w []float32, rows, cols, heads int) []float32 {
	out := make([]float32, len(w))
	d := rows / heads
	for h := range heads {
		for j := range d / 2 {
			for i := range 2 {
				dst := (h*d + 2*j + i) * cols
				src := (h*d + i*d/2 + j) * cols
				copy(out[dst:dst+cols], w[src:src+cols])
			}
		}
	}
	return out
}
