package discover

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"dovetail/app/runner/pull"
)

// pullTiny pulls a real tiny model into dir as name, from a registry
// started here.
func pullTiny(t *testing.T, dir, name string) pull.Model {
	t.Helper()
	gguf, err := os.ReadFile("../../../testdata/models/stories260K/stories260K-Q4_0-mixed.gguf")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(gguf)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/library/tiny/blobs/"+digest {
			w.Write(gguf)
			return
		}
		fmt.Fprintf(w, `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":%q,"size":%d}]}`, digest, len(gguf))
	}))
	defer reg.Close()
	env := func(k string) string { return map[string]string{"DOVETAIL_REGISTRY": reg.URL}[k] }
	m, err := pull.Pull(context.Background(), name, pull.Options{Dir: dir, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The models `dovetail pull` fetched are found by the names they were
// pulled as, from the user's models folder (pull.Dir) by default.
func TestPulled(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOVETAIL_MODELS", dir)
	m := pullTiny(t, dir, "tiny:1b")
	p := UserPlaces(t.TempDir())
	if len(p.Pulled) != 1 || p.Pulled[0] != dir {
		t.Fatalf("UserPlaces().Pulled = %q, want the models folder %q", p.Pulled, dir)
	}
	got, err := Find(Places{Pulled: p.Pulled})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "tiny:1b" || got[0].Source != "pulled" || got[0].Path != m.Path || got[0].Size != m.Size {
		t.Errorf("found %+v", got)
	}
	// Served with --models DIR, the folder's blobs are not listed as files besides.
	got, _ = Find(Places{Paths: []string{dir}, Pulled: p.Pulled})
	if len(got) != 1 || got[0].Source != "pulled" {
		t.Errorf("with --models: %+v", got)
	}
}
