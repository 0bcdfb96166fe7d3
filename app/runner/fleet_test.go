package runner

import (
	"testing"

	"dovetail/app/runner/discover"
)

// A request finds a model by the name it is listed by, by its path, or by
// any name ollama would resolve to it ("s110:latest" for the file
// s110.gguf); an exact name wins over one that only resolves alike, the
// first listed (the user's files) over a later one, and the tagged name a
// list shows finds the model it lists.
func TestFleetLookup(t *testing.T) {
	f, err := NewFleet([]discover.Model{
		{Name: "s110.gguf", Path: "/m/s110.gguf", Source: "file"},
		{Name: "sub/b.gguf", Path: "/m/sub/b.gguf", Source: "file"},
		{Name: "llama3.gguf", Path: "/m/llama3.gguf", Source: "file"},
		{Name: "llama3:latest", Path: "/o/blobs/sha256-aa", Source: "ollama"},
		{Name: "jmorgan/tiny:latest", Path: "/o/blobs/sha256-bb", Source: "ollama"},
	}, FleetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"s110": "s110.gguf", "s110:latest": "s110.gguf", "s110.gguf": "s110.gguf", "S110:latest": "s110.gguf", "/m/s110.gguf": "s110.gguf",
		"sub/b": "sub/b.gguf", "sub/b:latest": "sub/b.gguf",
		"llama3": "llama3.gguf", "llama3:latest": "llama3:latest", "llama3.gguf": "llama3.gguf",
		"jmorgan/tiny": "jmorgan/tiny:latest", "registry.ollama.ai/jmorgan/tiny:latest": "jmorgan/tiny:latest",
	} {
		if e, ok := f.Lookup(name); !ok || e.Name != want {
			t.Errorf("%q found %q (%v), want %q", name, e.Name, ok, want)
		}
	}
	for _, name := range []string{"s110:q8", "b", "tiny", "default", "", "llama"} {
		if e, ok := f.Lookup(name); ok {
			t.Errorf("%q found %q", name, e.Name)
		}
	}
	for _, e := range f.Entries() {
		tagged := f.Tagged(e)
		if found, ok := f.Lookup(tagged); !ok || found.Name != e.Name {
			t.Errorf("%s listed as %q, which finds %q", e.Name, tagged, found.Name)
		}
	}
	if e, _ := f.Lookup("s110"); f.Tagged(e) != "s110:latest" {
		t.Errorf("s110.gguf listed as %q", f.Tagged(e))
	}
	if e, _ := f.Lookup("llama3.gguf"); f.Tagged(e) != "llama3.gguf" {
		t.Errorf("llama3.gguf, beside ollama's llama3:latest, listed as %q", f.Tagged(e))
	}
}

// keep_alive 0 for a model that is not loaded loads nothing.
func TestFleetExpireUnloaded(t *testing.T) {
	f, err := NewFleet([]discover.Model{{Name: "a.gguf", Path: "/nonexistent/a.gguf"}}, FleetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Expire("a"); err != nil || len(f.Loaded()) != 0 {
		t.Errorf("expire: %v, loaded %v", err, f.Loaded())
	}
	if err := f.Expire("b"); err == nil {
		t.Error("an unknown model expired")
	}
}
