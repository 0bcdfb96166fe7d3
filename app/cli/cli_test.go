package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"dovetail/internal/golden"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(args, &o, &e, nil)
	return o.String(), e.String(), code
}

func runJSON(t *testing.T, args ...string) runResult {
	t.Helper()
	out, errOut, code := runCLI(t, append([]string{"run", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r runResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return r
}

// Greedy output of `dovetail run` on the CPU equals llama.cpp's on the
// embedded model and on a model file. (The embedded model's second prompt
// has a near-tie at step 16, which cpu's golden test covers. Layers on a
// GPU compute in float32 and part from llama.cpp's CPU at near ties, as
// llama.cpp's own GPU does: runner's TestOffloadSpeculative holds them to
// that.)
func TestRunGreedyMatchesLlamaCpp(t *testing.T) {
	for _, c := range []struct{ golden, model string }{
		{"tinystories656K-Q8_0-p1", ""},
		{"stories260K-f32-p1", golden.ModelPath("stories260K-f32.gguf")},
		{"stories260K-f32-p2", golden.ModelPath("stories260K-f32.gguf")},
	} {
		gc, err := golden.Load(filepath.Join(golden.Root(), "golden", "greedy", c.golden))
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"-p", gc.Prompt, "--temp", "0", "-n", "64", "--gpu-layers", "0"}
		if c.model != "" {
			args = append(args, "-m", c.model)
		}
		r := runJSON(t, args...)
		if diff := cmp.Diff(gc.PromptTokens, r.PromptTokens); diff != "" {
			t.Errorf("%s: prompt tokens differ (-llama.cpp +dovetail):\n%s", c.golden, diff)
		}
		if diff := cmp.Diff(gc.Tokens(), r.Tokens); diff != "" {
			t.Errorf("%s: tokens differ (-llama.cpp +dovetail):\n%s", c.golden, diff)
		}
		if r.Text != gc.Text {
			t.Errorf("%s: text\n%q\nwant\n%q", c.golden, r.Text, gc.Text)
		}
		if !(r.Stats.GenTokensPerSec > 0 && r.Stats.PromptTokensPerSec > 0) {
			t.Errorf("%s: speeds missing: %+v", c.golden, r.Stats)
		}
	}
}

func TestRunSeeds(t *testing.T) {
	a := runJSON(t, "-p", "Once upon a time", "-n", "40", "--seed", "11", "--temp", "1")
	b := runJSON(t, "-p", "Once upon a time", "-n", "40", "--seed", "11", "--temp", "1")
	c := runJSON(t, "-p", "Once upon a time", "-n", "40", "--seed", "12", "--temp", "1")
	if !cmp.Equal(a.Tokens, b.Tokens) {
		t.Error("the same seed gave different tokens")
	}
	if cmp.Equal(a.Tokens, c.Tokens) {
		t.Error("seeds 11 and 12 gave the same 40 tokens")
	}
}

func TestRunStreamsTextAndSpeed(t *testing.T) {
	out, errOut, code := runCLI(t, "run", "-p", "Once upon a time", "-n", "20", "--temp", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.HasPrefix(out, " there was") && !strings.HasPrefix(out, ",") {
		t.Logf("story: %q", out)
	}
	if len(strings.TrimSpace(out)) < 20 {
		t.Errorf("story too short: %q", out)
	}
	if !strings.Contains(errOut, "tokens/s") {
		t.Errorf("no speed on stderr: %q", errOut)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.gguf")
	os.WriteFile(notGGUF, []byte("hello, this is not a model"), 0o644)
	trunc := filepath.Join(dir, "cut.gguf")
	full, _ := os.ReadFile(golden.ModelPath("stories260K-f32.gguf"))
	os.WriteFile(trunc, full[:len(full)/2], 0o644)
	vocabOnly := filepath.Join(golden.Root(), "golden", "tokenizer", "ggml-vocab-llama-spm.gguf")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "-m", filepath.Join(dir, "missing.gguf"), "-p", "x"}, 1, "missing.gguf: no such file"},
		{[]string{"run", "-m", notGGUF, "-p", "x"}, 1, "not a GGUF file"},
		{[]string{"run", "-m", trunc, "-p", "x"}, 1, "truncated"},
		{[]string{"run", "-m", dir, "-p", "x"}, 1, "is a directory"},
		{[]string{"run", "-m", vocabOnly, "-p", "x"}, 1, "token_embd.weight missing"},
		{[]string{"run"}, 2, "a prompt is required"},
		{[]string{"run", "-p", "x", "--top-p", "3"}, 2, "top-p"},
		{[]string{"run", "-p", "x", "--threads", "0"}, 2, "--threads"},
		{[]string{"run", "-p", "x", "--nope"}, 2, "unknown flag"},
		{[]string{"show", notGGUF}, 1, "not a GGUF file"},
		{[]string{"bench", "--reps", "0"}, 2, "--reps 0"},
		{[]string{"bench", "--threads", "0"}, 2, "--threads 0"},
		{[]string{"bench", "--depth", "-1"}, 2, "--depth -1"},
		{[]string{"bench", "--depth", "1000000"}, 1, "the context holds"},
		{[]string{"bench", "--gpu-layers", "-1"}, 2, "--gpu-layers -1"},
		{[]string{"bench", "--gpu-layers", "99"}, 1, "--gpu-layers 99: the model has"},
	}
	for _, c := range cases {
		_, errOut, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
		if n := strings.Count(strings.TrimSpace(errOut), "\n"); n != 0 || strings.Contains(errOut, "goroutine") {
			t.Errorf("%v: error is not one line: %q", c.args, errOut)
		}
	}
}

func TestShow(t *testing.T) {
	out, errOut, code := runCLI(t, "show", golden.ModelPath("stories260K-Q4_0-mixed.gguf"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"architecture", "llama", "context length", "128", "vocabulary", "512", "Q4_0", "Q8_0", "F16", "F32"} {
		if !strings.Contains(out, want) {
			t.Errorf("show output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, "show")
	if code != 0 || !strings.Contains(out, "TinyStories") {
		t.Errorf("show of the embedded model: exit %d\n%s", code, out)
	}
}

// Drafting changes the speed, never the greedy text. The planner is off:
// on these tiny models it may rightly find drafting slower and not draft.
func TestRunDraftsKeepGreedyOutput(t *testing.T) {
	model := golden.ModelPath("stories260K-f32.gguf")
	plain := runJSON(t, "-m", model, "-p", "Lily and Tom", "--temp", "0", "-n", "40", "--draft", "none")
	for _, d := range []string{"ngram", "model:" + golden.ModelPath("stories260K-Q4_0-mixed.gguf")} {
		r := runJSON(t, "-m", model, "-p", "Lily and Tom", "--temp", "0", "-n", "40", "--draft", d, "--tree-k", "4", "--tree-depth", "3", "--tree-tokens", "8", "--plan=false")
		if !cmp.Equal(r.Tokens, plain.Tokens) {
			t.Errorf("--draft %s: tokens %v, without drafting %v", d, r.Tokens, plain.Tokens)
		}
		if r.Stats.Rounds == 0 || r.Stats.Tau < 1 || r.Stats.Draft != d {
			t.Errorf("--draft %s: stats %+v", d, r.Stats)
		}
	}
	if plain.Stats.Rounds != 0 || plain.Stats.Draft != "none" {
		t.Errorf("no drafter, stats %+v", plain.Stats)
	}
}

func TestRunDraftErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "-p", "x", "--draft", "magic"}, 2, `draft "magic"`},
		{[]string{"run", "-p", "x", "--draft", "model:"}, 2, "needs a path"},
		{[]string{"run", "-p", "x", "--draft", "model:" + golden.ModelPath("stories260K-f32.gguf")}, 1, "vocabularies differ"},
		{[]string{"run", "-p", "x", "--tree-k", "0"}, 2, "--tree-k 0: want a value in [1, 64]"},
	}
	for _, c := range cases {
		_, errOut, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// --ignore-eos goes on past the end-of-text token where a plain run stops,
// with the same tokens up to there.
func TestRunIgnoreEOS(t *testing.T) {
	plain := runJSON(t, "-p", "Once upon a time", "-n", "400", "--draft", "none", "--temp", "0")
	if len(plain.Tokens) >= 400 {
		t.Skipf("the embedded model wrote %d tokens without ending", len(plain.Tokens))
	}
	all := runJSON(t, "-p", "Once upon a time", "-n", "400", "--ignore-eos", "--draft", "none", "--temp", "0")
	if len(all.Tokens) != 400 || all.Stats.StopReason == plain.Stats.StopReason {
		t.Fatalf("--ignore-eos: %d tokens (%s), plain %d (%s)", len(all.Tokens), all.Stats.StopReason, len(plain.Tokens), plain.Stats.StopReason)
	}
	if !slices.Equal(all.Tokens[:len(plain.Tokens)], plain.Tokens) {
		t.Error("--ignore-eos changed the tokens before the end")
	}
}

// bench --depth measures after that much context (on the embedded model,
// whose context has room for it), and says so.
func TestBenchDepth(t *testing.T) {
	stdout, errOut, code := runCLI(t, "bench", "--depth", "40", "--reps", "1", "--threads", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res benchResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if res.Depth != 40 || !(res.PrefillTokS > 0) || !(res.DecodeTokS > 0) || !(res.VerifyRatio["16"] > 0) {
		t.Errorf("bench --depth 40: %+v", res)
	}
}
