package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"dovetail/internal/registrytest"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/eagle/eagletest"
)

// eagleRepos serves an EAGLE-3 draft (its layers named in config.json)
// and an EAGLE-1 one as Hugging Face repositories, for a target of hidden
// size 32 and 100 tokens.
func eagleRepos(t *testing.T) {
	t.Helper()
	reg := registrytest.New(t)
	tg := models.Config{Arch: "llama", Hidden: 32, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 8, FFN: 48, Vocab: 100,
		ContextLength: 256, RMSEps: 1e-5, RopeTheta: 10000}
	for repo, s := range map[string]eagletest.Spec{
		"org/eagle3-tiny": {Target: tg, Kind: draft.EAGLE3, DraftVocab: 60,
			Config: map[string]any{"eagle_config": map[string]any{"eagle_aux_hidden_state_layer_ids": []int{1, 3, 7}}}},
		"org/eagle-tiny": {Target: tg, Kind: draft.EAGLE1, FCBias: true, Shards: 2},
	} {
		dir := filepath.Join(t.TempDir(), "repo")
		if err := eagletest.Write(dir, s); err != nil {
			t.Fatal(err)
		}
		if err := reg.AddRepoDir(repo, dir); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HF_ENDPOINT", reg.URL)
}

// pull of an EAGLE repository says what it pulled and what it fits;
// drafts lists the pulled drafts with their shapes under the saved ones;
// rm deletes one by name.
func TestDraftsListsPulledEagle(t *testing.T) {
	eagleRepos(t)
	models := filepath.Join(t.TempDir(), "models")
	t.Setenv("DOVETAIL_MODELS", models)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	out, errOut, code := runCLI(t, "drafts")
	if code != 0 || !strings.Contains(out, "no saved drafts") || !strings.Contains(out, "no pulled EAGLE drafts") {
		t.Fatalf("drafts with none: exit %d, %q %q", code, out, errOut)
	}
	dir := filepath.Join(models, "drafts", "hf.co", "org", "eagle3-tiny")
	out, errOut, code = runCLI(t, "pull", "hf.co/org/eagle3-tiny")
	if code != 0 || !strings.Contains(out, "pulled EAGLE-3 draft hf.co/org/eagle3-tiny (") ||
		!strings.Contains(out, "into "+dir+"; it drafts for targets of hidden size 32 and vocabulary 100 (--draft eagle:"+dir+")") {
		t.Fatalf("pull: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code = runCLI(t, "pull", "huggingface.co/org/eagle-tiny"); code != 0 {
		t.Fatalf("pull EAGLE-1: exit %d, %q", code, errOut)
	}
	out, errOut, code = runCLI(t, "drafts")
	if code != 0 {
		t.Fatalf("drafts: exit %d, %q", code, errOut)
	}
	lines := strings.Split(out, "\n")
	row := func(name string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == name {
				return f
			}
		}
		t.Fatalf("drafts lists no %s:\n%s", name, out)
		return nil
	}
	if !strings.Contains(out, "EAGLE DRAFT") || !strings.Contains(out, "in "+filepath.Join(models, "drafts", "hf.co")) {
		t.Errorf("drafts:\n%s", out)
	}
	if r := strings.Join(row("hf.co/org/eagle3-tiny"), " "); !strings.Contains(r, "EAGLE-3") || !strings.HasSuffix(r, " 32 100 target layers 1, 3, 7") {
		t.Errorf("EAGLE-3 row: %q", r)
	}
	if r := strings.Join(row("hf.co/org/eagle-tiny"), " "); !strings.Contains(r, "EAGLE-1") || !strings.HasSuffix(r, " 32 100 final hidden state") {
		t.Errorf("EAGLE-1 row: %q", r)
	}
	out, errOut, code = runCLI(t, "rm", "hf.co/org/eagle3-tiny")
	if code != 0 || out != "deleted 'hf.co/org/eagle3-tiny'\n" {
		t.Fatalf("rm: exit %d, %q %q", code, out, errOut)
	}
	if out, _, _ = runCLI(t, "drafts"); strings.Contains(out, "eagle3-tiny") || !strings.Contains(out, "hf.co/org/eagle-tiny") {
		t.Errorf("drafts after rm:\n%s", out)
	}
	if _, errOut, code = runCLI(t, "rm", "hf.co/org/eagle3-tiny"); code != 1 || !strings.Contains(errOut, "no pulled model") {
		t.Errorf("rm twice: exit %d, %q", code, errOut)
	}
}
