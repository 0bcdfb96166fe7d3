package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"dovetail/internal/golden"
	"dovetail/models/draft"
)

// tinyCorpus is a few short stories in TinyStories' style.
const tinyCorpus = `Once upon a time, there was a little girl named Lily. She loved to play outside with her ball. One day, she saw a big dog in the park. The dog wanted to play too. Lily threw the ball and the dog ran after it. They played all day and became best friends.
<|endoftext|>
Tom had a red car. He liked to drive it around the house. One day, the car broke. Tom was sad. His mom said, "Don't worry, we can fix it." They fixed the car together and Tom was happy again.
<|endoftext|>
Once upon a time, there was a little bird. The bird lived in a tall tree. Every morning, the bird sang a song. The sun was warm and the sky was blue. The bird was very happy in the tree.
<|endoftext|>
Sam and Mia went to the beach. They built a big sand castle. A wave came and broke the castle. Sam and Mia laughed and built it again. It was a fun day at the beach.
<|endoftext|>
Lily and Tom were friends. They liked to play in the park. One day, they found a little cat. The cat was hungry. Lily gave the cat some milk. The cat was happy and played with them.
`

var heldOut = regexp.MustCompile(`held out \(\d+ positions\): loss ([0-9.]+)`)

func distillLoss(t *testing.T, args ...string) float64 {
	t.Helper()
	_, errOut, code := runCLI(t, append([]string{"distill"}, args...)...)
	if code != 0 {
		t.Fatalf("distill %v: exit %d\n%s", args, code, errOut)
	}
	m := heldOut.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no held-out loss in\n%s", errOut)
	}
	l, _ := strconv.ParseFloat(m[1], 64)
	return l
}

// Distilling on a tiny corpus lowers the loss on a held-out story it never
// saw, and the draft it
// writes drafts for its target without changing the greedy output.
func TestDistillReducesLoss(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.txt")
	if err := os.WriteFile(corpus, []byte(tinyCorpus), 0o644); err != nil {
		t.Fatal(err)
	}
	model := golden.ModelPath("stories260K-f32.gguf")
	common := []string{"-m", model, "--corpus", corpus, "--seq-len", "32", "--batch", "128", "--lr", "5e-3",
		"--warmup", "5", "--eval", "0.25", "-t", "2", "--fresh"}
	out := filepath.Join(dir, "d.gguf")
	before := distillLoss(t, append(common, "--steps", "1", "-o", filepath.Join(dir, "d0.gguf"))...)
	after := distillLoss(t, append(common, "--steps", "60", "-o", out)...)
	if !(after < 0.7*before) {
		t.Errorf("held-out loss %.4f after 60 steps, %.4f after 1", after, before)
	}
	t.Logf("held-out loss %.4f → %.4f", before, after)

	plain := runJSON(t, "-m", model, "-p", "Lily and Tom", "--temp", "0", "-n", "40", "--draft", "none")
	r := runJSON(t, "-m", model, "-p", "Lily and Tom", "--temp", "0", "-n", "40", "--draft", "dgf:"+out, "--plan=false")
	if !cmp.Equal(r.Tokens, plain.Tokens) {
		t.Errorf("--draft dgf: tokens %v, without drafting %v", r.Tokens, plain.Tokens)
	}
	if r.Stats.Rounds == 0 || r.Stats.Draft != "dgf:"+out {
		t.Errorf("--draft dgf: stats %+v", r.Stats)
	}
	// Made for the f32 file, the draft is refused for the Q8_0 one.
	_, errOut, code := runCLI(t, "run", "-m", golden.ModelPath("stories260K-Q8_0-mixed.gguf"), "-p", "x", "--draft", "dgf:"+out)
	if code != 1 || !strings.Contains(errOut, "another model") {
		t.Errorf("draft for another target: exit %d, %s", code, errOut)
	}
}

// An interrupted run leaves a resume checkpoint; the same command goes on
// from it to the end.
func TestDistillResumes(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.txt")
	os.WriteFile(corpus, []byte(tinyCorpus), 0o644)
	out := filepath.Join(dir, "d.gguf")
	args := []string{"distill", "-m", golden.ModelPath("stories260K-f32.gguf"), "--corpus", corpus, "--seq-len", "16",
		"--batch", "32", "--steps", "12", "--eval", "0", "-t", "2", "-o", out}
	_, errOut, code := runCLI(t, append(args, "--stop-after", "5")...)
	if code != 130 || !strings.Contains(errOut, "interrupted at step 5 of 12") {
		t.Fatalf("interrupted run: exit %d\n%s", code, errOut)
	}
	ck, err := draft.Load(out + ".resume")
	if err != nil {
		t.Fatal(err)
	}
	if ck.Meta["step"] != "5" || ck.Meta["adam.step"] != "5" {
		t.Errorf("resume checkpoint at step %s (optimizer %s), want 5", ck.Meta["step"], ck.Meta["adam.step"])
	}
	// Other settings cannot continue it.
	if _, errOut, code := runCLI(t, append(args, "--lr", "1e-2")...); code != 2 || !strings.Contains(errOut, "other settings") {
		t.Errorf("resume with other settings: exit %d\n%s", code, errOut)
	}
	_, errOut, code = runCLI(t, args...)
	if code != 0 || !strings.Contains(errOut, "resuming from") || !strings.Contains(errOut, "at step 5 of 12") {
		t.Fatalf("resumed run: exit %d\n%s", code, errOut)
	}
	final, err := draft.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if final.Meta["step"] != "12" {
		t.Errorf("final draft at step %s, want 12", final.Meta["step"])
	}
	if _, err := os.Stat(out + ".resume"); !os.IsNotExist(err) {
		t.Errorf("resume checkpoint left behind: %v", err)
	}
}

func TestDistillUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"distill", "--self", "3"}, "output file is required"},
		{[]string{"distill", "-o", "x.gguf"}, "no training text"},
		{[]string{"distill", "--self", "3", "-o", "x.gguf", "--blocks", "0"}, "--blocks 0"},
		{[]string{"distill", "--self", "3", "-o", "x.gguf", "--seq-len", "512", "--batch", "64"}, "--batch 64"},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// --draft auto drafts the embedded model with its shipped DGF draft, which
// accepts most of what it proposes, and changes nothing in the output.
func TestRunAutoUsesEmbeddedDraft(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no installed drafts
	t.Setenv("HOME", t.TempDir())
	plain := runJSON(t, "-p", "Once upon a time", "--temp", "0", "-n", "60", "--draft", "none")
	r := runJSON(t, "-p", "Once upon a time", "--temp", "0", "-n", "60", "--plan=false")
	if !cmp.Equal(r.Tokens, plain.Tokens) {
		t.Errorf("--draft auto: tokens %v, without drafting %v", r.Tokens, plain.Tokens)
	}
	// The planner may decode without the draft; the output is the same.
	if p := runJSON(t, "-p", "Once upon a time", "--temp", "0", "-n", "60"); !cmp.Equal(p.Tokens, plain.Tokens) || p.Stats.PredictedTokS <= 0 {
		t.Errorf("--plan: tokens %v (predicted %.1f tokens/s), without drafting %v", p.Tokens, p.Stats.PredictedTokS, plain.Tokens)
	}
	if !cmp.Equal(r.Tokens, plain.Tokens) {
		t.Errorf("--draft auto: tokens %v, without drafting %v", r.Tokens, plain.Tokens)
	}
	if r.Stats.Draft != "dgf:embedded:tinystories656K-Q8_0.dgf.gguf" || r.Stats.Tau < 2 {
		t.Errorf("--draft auto: stats %+v", r.Stats)
	}
	// The embedded draft is small: --device auto keeps it on the CPU.
	if !strings.HasPrefix(r.Stats.DraftDevice, "host (") {
		t.Errorf("--draft auto: the draft runs on %q, want the host", r.Stats.DraftDevice)
	}
	t.Logf("τ %.2f, acceptance by depth %v", r.Stats.Tau, r.Stats.AcceptanceByDepth)
	// A model with no draft of its own starts an untrained one that
	// adapts (day 0), or runs without one when adaptation is off.
	r = runJSON(t, "-m", golden.ModelPath("stories260K-f32.gguf"), "-p", "Once", "--temp", "0", "-n", "8")
	if r.Stats.Draft != "dgf:untrained" || r.Stats.Adapt != "background" {
		t.Errorf("--draft auto for a model without a draft: %+v", r.Stats)
	}
	// That request ran before the new draft: nothing was planned, so
	// nothing is predicted of it.
	if r.Stats.PredictedTokS != 0 || r.Stats.Rounds+r.Stats.PlainSteps != 0 {
		t.Errorf("a request the new draft did not run: predicted %.1f tokens/s, %d rounds, %d plain steps",
			r.Stats.PredictedTokS, r.Stats.Rounds, r.Stats.PlainSteps)
	}
	r = runJSON(t, "-m", golden.ModelPath("stories260K-f32.gguf"), "-p", "Once", "--temp", "0", "-n", "8", "--adapt", "off")
	if r.Stats.Draft != "none" {
		t.Errorf("--draft auto --adapt off for a model without a draft: %+v", r.Stats)
	}
}

// A draft installed under the target's fingerprint is what --draft auto
// picks.
func TestRunAutoUsesInstalledDraft(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.txt")
	os.WriteFile(corpus, []byte(tinyCorpus), 0o644)
	model := golden.ModelPath("stories260K-f32.gguf")
	_, errOut, code := runCLI(t, "distill", "-m", model, "--corpus", corpus, "--seq-len", "16", "--batch", "32",
		"--steps", "3", "-t", "2", "-o", filepath.Join(dir, "d.gguf"), "--install")
	if code != 0 || !strings.Contains(errOut, filepath.Join(cfg, "dovetail", "drafts")) {
		t.Fatalf("distill --install: exit %d\n%s", code, errOut)
	}
	r := runJSON(t, "-m", model, "-p", "Once", "--temp", "0", "-n", "8")
	if !strings.HasPrefix(r.Stats.Draft, "dgf:"+filepath.Join(cfg, "dovetail", "drafts")) {
		t.Errorf("--draft auto with an installed draft: %+v", r.Stats)
	}
}

// --self continues the samples an earlier run left in OUT.self.txt, and
// says so; --fresh replaces them, saying so; neither is silent.
func TestDistillSaysWhatItDoesWithSamples(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "d.gguf")
	samples := out + ".self.txt"
	os.WriteFile(samples, []byte("Once upon a time there was a cat.\n<|endoftext|>\n"), 0o644)
	distill := func(extra ...string) string {
		t.Helper()
		args := append([]string{"distill", "-m", golden.ModelPath("stories260K-f32.gguf"), "--self-len", "12", "--seq-len", "8",
			"--batch", "8", "--steps", "1", "--eval", "0", "-t", "1", "-o", out, "--force"}, extra...)
		_, errOut, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", extra, code, errOut)
		}
		return errOut
	}
	count := func() int { b, _ := os.ReadFile(samples); return strings.Count(string(b), "<|endoftext|>") }
	if errOut := distill("--self", "3"); !strings.Contains(errOut, "continuing the 1 samples already in "+samples+": 2 more to make") || count() != 3 {
		t.Errorf("continuing: %d samples kept\n%s", count(), errOut)
	}
	if errOut := distill("--self", "2"); !strings.Contains(errOut, "using 2 of the 3 samples already in "+samples) {
		t.Errorf("reusing:\n%s", errOut)
	}
	first, _ := os.ReadFile(samples)
	if errOut := distill("--self", "2", "--fresh"); !strings.Contains(errOut, "replacing the 3 samples in "+samples) || count() != 2 {
		t.Errorf("--fresh: %d samples\n%s", count(), errOut)
	}
	if now, _ := os.ReadFile(samples); strings.HasPrefix(string(now), string(first[:20])) {
		t.Errorf("--fresh kept the old samples: %q", now)
	}
}
