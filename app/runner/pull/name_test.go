package pull

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ref      Ref
	}{
		{"llama3.2", "llama3.2:latest", Ref{ollamaHost, "library", "llama3.2", "latest", ""}},
		{"llama3.2:1b", "llama3.2:1b", Ref{ollamaHost, "library", "llama3.2", "1b", ""}},
		{" llama3.2:1b\n", "llama3.2:1b", Ref{ollamaHost, "library", "llama3.2", "1b", ""}},
		{"library/qwen2.5:0.5b", "qwen2.5:0.5b", Ref{ollamaHost, "library", "qwen2.5", "0.5b", ""}},
		{"registry.ollama.ai/library/qwen2.5:0.5b", "qwen2.5:0.5b", Ref{ollamaHost, "library", "qwen2.5", "0.5b", ""}},
		{"https://registry.ollama.ai/library/qwen2.5:0.5b", "qwen2.5:0.5b", Ref{ollamaHost, "library", "qwen2.5", "0.5b", ""}},
		{"user/mymodel", "user/mymodel:latest", Ref{ollamaHost, "user", "mymodel", "latest", ""}},
		{"localhost:5000/team/model:v1", "localhost:5000/team/model:v1", Ref{"localhost:5000", "team", "model", "v1", ""}},
		{"Registry.Example.com/team/Model:V1", "registry.example.com/team/Model:V1", Ref{"registry.example.com", "team", "Model", "V1", ""}},
		{"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
			Ref{hfHost, "bartowski", "Llama-3.2-1B-Instruct-GGUF", "Q4_K_M", ""}},
		{"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF", "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:latest",
			Ref{hfHost, "bartowski", "Llama-3.2-1B-Instruct-GGUF", "latest", ""}},
		{"huggingface.co/org.name/repo:IQ3_XXS", "hf.co/org.name/repo:IQ3_XXS", Ref{hfHost, "org.name", "repo", "IQ3_XXS", ""}},
		{"hf.co/org/repo/model-Q8_0.gguf", "hf.co/org/repo/model-Q8_0.gguf", Ref{hfHost, "org", "repo", "", "model-Q8_0.gguf"}},
		{"hf.co/org/repo/Q4/model-00001-of-00002.gguf", "hf.co/org/repo/Q4/model-00001-of-00002.gguf",
			Ref{hfHost, "org", "repo", "", "Q4/model-00001-of-00002.gguf"}},
		{"https://huggingface.co/org/repo/blob/main/m.gguf", "hf.co/org/repo/m.gguf", Ref{hfHost, "org", "repo", "", "m.gguf"}},
		{"https://huggingface.co/org/repo/resolve/main/m.gguf", "hf.co/org/repo/m.gguf", Ref{hfHost, "org", "repo", "", "m.gguf"}},
	} {
		r, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if r != c.ref || r.String() != c.want {
			t.Errorf("Parse(%q) = %+v (%q), want %+v (%q)", c.in, r, r, c.ref, c.want)
		}
		if back, err := Parse(r.String()); err != nil || back != r {
			t.Errorf("Parse(%q) does not read back its String %q: %+v %v", c.in, r, back, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"", "  ", "llama3:", "../etc/passwd", "/etc/passwd", "a/../../b", "..", ".hidden", "ns/.x:1", "m:../x",
		"model:t/ag", "a/b/c/d", "a b", "llama3:8b:extra", "ns.dot/model", "host:port/ns/m", "hf.co", "hf.co/org",
		"hf.co/org/repo:", "hf.co/org/repo/notes.txt", "hf.co/org/repo/blob/dev/m.gguf", "hf.co/org/repo/../m.gguf",
		"model\x00", "-model", "C:\\models\\x.gguf",
	} {
		if r, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", in, r)
		}
	}
}

// A manifest's path reads back as the name it was written for, and a
// path no name has reads as none.
func TestRefOf(t *testing.T) {
	for _, name := range []string{"llama3.2:1b", "user/m:latest", "localhost:5000/t/m:v1", "hf.co/o/r:Q4_K_M", "hf.co/o/r/sub/f.gguf"} {
		r, _ := Parse(name)
		back, ok := refOf(r.parts())
		if !ok || back != r {
			t.Errorf("refOf(%v) = %+v %v, want %+v", r.parts(), back, ok, r)
		}
	}
	for _, p := range [][]string{{"a", "b", "c"}, {"registry.ollama.ai", "library", "m", "t", "x"}, {"h", "..", "m", "t"}} {
		if r, ok := refOf(p); ok {
			t.Errorf("refOf(%v) = %+v, want none", p, r)
		}
	}
}
