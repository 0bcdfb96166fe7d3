package desktop

import "dovetail/app/runner/pull"

// catalogModel is a model the "Get models" page offers by name.
type catalogModel struct {
	Name  string // as ollama's library names it
	About string
	Size  uint64       // the download, about: as ollama's library lists the tag
	Draft catalogDraft // the EAGLE draft published for it, if any
}

// catalogDraft is an EAGLE draft published on Hugging Face for a
// catalogue model (safetensors or PyTorch's pytorch_model.bin: pull
// fetches either and Dovetail reads both).
type catalogDraft struct {
	Name  string // hf.co/ORG/REPO
	About string
	Size  uint64 // the repository's weights, as its file list gives them
}

// catalog is a short list of well-known small models of the
// architectures Dovetail runs (Llama, Qwen2, Mistral), smallest first,
// then larger ones people run for which a trained EAGLE draft is
// published (none is for the small ones). Sizes are each tag's download
// as ollama's library pages list it (its default quantization, in decimal
// bytes), and each draft's weights as its repository's file list gives
// them, written down from there and not
// checked against the registry: the page says "about", and the pull
// itself counts the real bytes.
var catalog = []catalogModel{
	{Name: "smollm2:135m", About: "SmolLM2 135M, Q8_0", Size: 271e6},
	{Name: "qwen2.5:0.5b", About: "Qwen2.5 0.5B Instruct, Q4_K_M", Size: 398e6},
	{Name: "qwen2.5-coder:0.5b", About: "Qwen2.5 Coder 0.5B, Q4_K_M", Size: 398e6},
	{Name: "tinyllama:1.1b", About: "TinyLlama 1.1B Chat, Q4_0", Size: 638e6},
	{Name: "smollm2:360m", About: "SmolLM2 360M, Q8_0", Size: 726e6},
	{Name: "qwen2.5:1.5b", About: "Qwen2.5 1.5B Instruct, Q4_K_M", Size: 986e6},
	{Name: "llama3.2:1b", About: "Llama 3.2 1B Instruct, Q8_0", Size: 1.3e9},
	{Name: "smollm2:1.7b", About: "SmolLM2 1.7B, Q8_0", Size: 1.8e9},
	{Name: "qwen2.5:3b", About: "Qwen2.5 3B Instruct, Q4_K_M", Size: 1.9e9},
	{Name: "llama3.2:3b", About: "Llama 3.2 3B Instruct, Q4_K_M", Size: 2.0e9},
	{Name: "llama3.1:8b", About: "Llama 3.1 8B Instruct, Q4_K_M", Size: 4.9e9, Draft: catalogDraft{
		Name: "hf.co/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", About: "EAGLE-3 draft by EAGLE's authors", Size: 850e6}},
	{Name: "llama3:70b", About: "Llama 3 70B Instruct, Q4_0", Size: 40e9, Draft: catalogDraft{
		Name: "hf.co/yuhuili/EAGLE-LLaMA3-Instruct-70B", About: "EAGLE-1 draft by EAGLE's authors", Size: 4.08e9}},
	{Name: "llama3.3:70b", About: "Llama 3.3 70B Instruct, Q4_K_M", Size: 43e9, Draft: catalogDraft{
		Name: "hf.co/lmsys/SGLang-EAGLE3-Llama-3.3-70B-Instruct-SpecForge", About: "EAGLE-3 draft by LMSYS (SpecForge)", Size: 2.81e9}},
}

// draftFor is the EAGLE draft the catalogue lists for a model, by any
// spelling of its name ("llama3.3:70b", "library/llama3.3:70b").
func draftFor(name string) (catalogDraft, bool) {
	r, err := pull.Parse(name)
	if err != nil {
		return catalogDraft{}, false
	}
	for _, m := range catalog {
		if c, err := pull.Parse(m.Name); err == nil && m.Draft.Name != "" && c == r {
			return m.Draft, true
		}
	}
	return catalogDraft{}, false
}
