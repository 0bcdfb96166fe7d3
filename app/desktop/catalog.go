package desktop

// catalogModel is a model the "Get models" page offers by name.
type catalogModel struct {
	Name  string // as ollama's library names it
	About string
	Size  uint64 // the download, about: as ollama's library lists the tag
}

// catalog is a short list of well-known small models of the
// architectures Dovetail runs (Llama, Qwen2, Mistral), smallest first.
// Sizes are each tag's download as ollama's library pages list it (its
// default quantization, in decimal megabytes), written down from there
// and not checked against the registry: the page says "about", and the
// pull itself counts the real bytes.
var catalog = []catalogModel{
	{"smollm2:135m", "SmolLM2 135M, Q8_0", 271e6},
	{"qwen2.5:0.5b", "Qwen2.5 0.5B Instruct, Q4_K_M", 398e6},
	{"qwen2.5-coder:0.5b", "Qwen2.5 Coder 0.5B, Q4_K_M", 398e6},
	{"tinyllama:1.1b", "TinyLlama 1.1B Chat, Q4_0", 638e6},
	{"smollm2:360m", "SmolLM2 360M, Q8_0", 726e6},
	{"qwen2.5:1.5b", "Qwen2.5 1.5B Instruct, Q4_K_M", 986e6},
	{"llama3.2:1b", "Llama 3.2 1B Instruct, Q8_0", 1.3e9},
	{"smollm2:1.7b", "SmolLM2 1.7B, Q8_0", 1.8e9},
	{"qwen2.5:3b", "Qwen2.5 3B Instruct, Q4_K_M", 1.9e9},
	{"llama3.2:3b", "Llama 3.2 3B Instruct, Q4_K_M", 2.0e9},
}
