package server_test

import (
	"path/filepath"
	"testing"

	"dovetail/app/runner/pull"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/eagle/eagletest"
)

// /api/pull of an EAGLE draft's repository pulls the draft into the
// models folder; it joins no fleet, which holds models to serve.
func TestOllamaPullDraft(t *testing.T) {
	p := startPulls(t, nil)
	dir := filepath.Join(t.TempDir(), "repo")
	tg := models.Config{Arch: "llama", Hidden: 32, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 8, FFN: 48, Vocab: 100,
		ContextLength: 256, RMSEps: 1e-5, RopeTheta: 10000}
	if err := eagletest.Write(dir, eagletest.Spec{Target: tg, Kind: draft.EAGLE3}); err != nil {
		t.Fatal(err)
	}
	if err := p.reg.AddRepoDir("org/eagle3-tiny", dir); err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, p.URL+"/api/pull", `{"model":"hf.co/org/eagle3-tiny","stream":false}`); code != 200 {
		t.Fatalf("pull: %d %s", code, body)
	}
	if ds, _ := pull.Drafts(p.dir); len(ds) != 1 || ds[0].Name != "hf.co/org/eagle3-tiny" {
		t.Errorf("drafts %+v", ds)
	}
	if names := tagged(t, p.URL); has(names, "hf.co/org/eagle3-tiny") || has(names, "hf.co/org/eagle3-tiny:latest") {
		t.Errorf("/api/tags lists the draft: %q", names)
	}
	if code, body := post(t, p.URL+"/api/show", `{"model":"hf.co/org/eagle3-tiny"}`); code != 404 {
		t.Errorf("/api/show of the draft: %d %s, want 404 (no model of the fleet)", code, body)
	}
}
