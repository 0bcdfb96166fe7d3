package cli

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"dovetail/app/runner"
	"dovetail/app/runner/store"
	"dovetail/internal/golden"
	"dovetail/models/draft"
	"dovetail/models/gguf"
	"dovetail/models/synth"
	"dovetail/models/synth/synthtest"
	"dovetail/quant"
)

// command is the command line run as a process of its own.
func command(args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), mainEnv+"=1")
	return c
}

// -p - reads the prompt from standard input.
func TestRunPromptFromStdin(t *testing.T) {
	want := runJSON(t, "-p", "Once upon a time", "--temp", "0", "-n", "12", "--draft", "none")
	c := command("run", "--json", "-p", "-", "--temp", "0", "-n", "12", "--draft", "none")
	c.Stdin = strings.NewReader("Once upon a time\n")
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got runResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(got.Tokens, want.Tokens) || !cmp.Equal(got.PromptTokens, want.PromptTokens) {
		t.Errorf("from stdin: %v %v, from -p: %v %v", got.PromptTokens, got.Tokens, want.PromptTokens, want.Tokens)
	}
}

// Ctrl-C stops a run: what was generated stays printed, and it exits 130.
func TestRunInterruptExits130(t *testing.T) {
	// Beyond the model's context, to the end of a long one and past its
	// end-of-text tokens: far longer than the test waits.
	c := command("run", "-p", "Once upon a time", "-n", "0", "--ctx", "200000", "--ignore-eos", "--draft", "none", "--temp", "0")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if _, err := r.ReadString(' '); err != nil {
		t.Fatalf("no text before the interrupt: %v (%s)", err, stderr.String())
	}
	c.Process.Signal(syscall.SIGINT)
	rest, _ := io.ReadAll(r)
	err = c.Wait()
	if c.ProcessState.ExitCode() != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("exit %d (%v), stderr %q", c.ProcessState.ExitCode(), err, stderr.String())
	}
	if len(rest) == 0 {
		t.Error("nothing more printed after the first word")
	}
}

// --version names the release, the commit and the kernel level.
func TestVersion(t *testing.T) {
	out, _, code := runCLI(t, "--version")
	if code != 0 || !regexp.MustCompile(`^dovetail \d+\.\d+\.\d+ \(.+\), kernels \w+\n$`).MatchString(out) {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	if !strings.Contains(out, runner.KernelLevel()) {
		t.Errorf("--version %q lacks the kernel level %s", out, runner.KernelLevel())
	}
}

// No flag value reaches a panic, a runtime error or a stack trace: each is
// refused in one line that names it.
func TestBadValuesNeverPanic(t *testing.T) {
	cpus := strconv.Itoa(runtime.NumCPU() + 1)
	for _, args := range [][]string{
		{"run", "-p", "x", "--ctx", "999999999"},
		{"run", "-p", "x", "--ctx", "-5"},
		{"run", "-p", "x", "--ctx", "36028797018963968"},  // 2^55: the cache's size overflowed
		{"run", "-p", "x", "--ctx", "576460752303423488"}, // 2^59: makeslice: len out of range
		{"run", "-p", "x", "--ctx", "9223372036854775807"},
		{"run", "-p", "x", "--threads", cpus},
		{"run", "-p", "x", "--threads", "-1"},
		{"run", "-p", "x", "--threads", "100000000000"},
		{"run", "-p", "x", "--top-k", "-3"},
		{"run", "-p", "x", "--tree-tokens", "100000"},
		{"run", "-p", "x", "--tree-depth", "-1"},
		{"run", "-p", "x", "--device", "tpu"},
		{"run", "-p", "x", "--device", "cuda:-4"},
		{"run", "-p", "x", "--adapt", "sometimes"},
		{"run", "-p", "x", "--adapt-threads", "0"},
		{"run", "-p", "x", "--adapt-memory", "-1"},
		{"run", "-p", "x", "--adapt-duty", "0"},
		{"run", "-p", "x", "--adapt-save-every", "-1s"},
		{"run", "-p", "x", "--draft", "model:/nonexistent.gguf"},
		{"run", "-p", "x", "--draft", "dgf:/nonexistent.gguf"},
		{"serve", "--port", "70000"},
		{"serve", "--parallel", "0"},
		{"serve", "--queue", "-1"},
		{"serve", "--threads", cpus},
		{"serve", "--ctx", "999999999"},
		{"serve", "--parallel", "2", "--adapt", "per-request"},
		{"bench", "--threads", cpus},
		{"distill", "--self", "2", "-o", filepath.Join(t.TempDir(), "d.gguf"), "--lr", "-1"},
		{"drafts", "rm", ""},
	} {
		_, errOut, code := runCLI(t, args...)
		if (code != 1 && code != 2) || !strings.HasPrefix(errOut, "dovetail: ") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		for _, bad := range []string{"panic", "goroutine", "runtime error", "internal error"} {
			if strings.Contains(errOut, bad) {
				t.Errorf("%v: %q", args, errOut)
			}
		}
	}
}

// A context beyond the model's training length runs with a warning; one
// whose cache cannot fit is refused with the sizes; threads beyond the
// machine's are refused with the count.
func TestContextAndThreads(t *testing.T) {
	model := golden.ModelPath("stories260K-f32.gguf")
	_, errOut, code := runCLI(t, "run", "-m", model, "-p", "x", "-n", "4", "--ctx", "300", "--draft", "none")
	if code != 0 || !strings.Contains(errOut, "warning: context 300 is beyond the 128 tokens") {
		t.Errorf("--ctx 300: exit %d, %q", code, errOut)
	}
	// 256 layers of 64 keys and values: a cache of 2^24 positions takes
	// 1 TiB, more than any machine the tests run on.
	deep := synthModel(t, "dim=64,layers=256,heads=4,ffn=64,vocab=300,ctx=128")
	_, errOut, code = runCLI(t, "run", "-m", deep, "-p", "x", "--draft", "none", "--ctx", "16777216")
	if code != 1 || !strings.Contains(errOut, "not enough memory: a context of 16777216 positions needs a kv cache of 1.0 TiB") {
		t.Errorf("--ctx 16777216: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "run", "-p", "x", "--ctx", "999999999")
	if code != 2 || !strings.Contains(errOut, "--ctx 999999999: want a value in [0, 16777216]") {
		t.Errorf("--ctx 999999999: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "run", "-p", "x", "--threads", "1000")
	if code != 2 || !strings.Contains(errOut, "this machine has "+strconv.Itoa(runtime.NumCPU())+" logical CPUs") {
		t.Errorf("--threads 1000: exit %d, %q", code, errOut)
	}
}

// synthModel writes a random-weight model of shape (synth's syntax) and
// returns its path.
func synthModel(t *testing.T, shape string) string {
	return synthtest.File(t, synthtest.Shape(t, shape), synth.Options{Type: quant.Q8_0, Seed: 1})
}

// installAt saves a draft for a made-up target named target under
// fingerprint fp in the test's user store.
func installAt(t *testing.T, fp, target string) {
	t.Helper()
	st, err := store.Open()
	if err != nil {
		t.Fatal(err)
	}
	c := draft.Config{Hidden: 8, Blocks: 1, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 16, Context: 64, RopeTheta: 10000, RMSEps: 1e-5}
	ck := &draft.Checkpoint{Config: c, Fingerprint: fp, TargetName: target, Tensors: map[string][]float32{}, Meta: map[string]string{}}
	for _, s := range c.Shapes() {
		ck.Tensors[s.Name] = make([]float32, s.Size())
	}
	if _, _, err := st.Install(ck); err != nil {
		t.Fatal(err)
	}
}

// drafts rm removes only what a name names unambiguously: two different
// models called x.gguf are listed, and nothing is removed.
func TestDraftsRmAmbiguous(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	installAt(t, a, "x.gguf")
	installAt(t, b, "x.gguf")
	_, errOut, code := runCLI(t, "drafts", "rm", "x.gguf")
	if code != 1 || !strings.Contains(errOut, a) || !strings.Contains(errOut, b) {
		t.Fatalf("drafts rm x.gguf: exit %d, %q", code, errOut)
	}
	if out, _, _ := runCLI(t, "drafts"); strings.Count(out, "x.gguf") != 2 {
		t.Fatalf("after a refused rm:\n%s", out)
	}
	// Nor the start of a fingerprint; nor half of a list.
	if _, _, code := runCLI(t, "drafts", "rm", "aaaa"); code != 1 {
		t.Errorf("drafts rm aaaa: exit %d", code)
	}
	if _, _, code := runCLI(t, "drafts", "rm", a, "nosuch.gguf"); code != 1 {
		t.Errorf("drafts rm with one bad name: exit %d", code)
	}
	if out, _, _ := runCLI(t, "drafts"); strings.Count(out, "x.gguf") != 2 {
		t.Fatalf("a list with a bad name removed something:\n%s", out)
	}
	out, errOut, code := runCLI(t, "drafts", "rm", a)
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("drafts rm FINGERPRINT: exit %d, %q %q", code, out, errOut)
	}
	if out, _, _ := runCLI(t, "drafts"); strings.Count(out, "x.gguf") != 1 || !strings.Contains(out, b) {
		t.Fatalf("after removing one:\n%s", out)
	}
}

// distill -o refuses to overwrite a file unless --force; --install keeps
// the draft it replaces, which drafts restore brings back.
func TestDistillKeepsFiles(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.txt")
	os.WriteFile(corpus, []byte(tinyCorpus), 0o644)
	out := filepath.Join(dir, "mine.gguf")
	os.WriteFile(out, []byte("my own file"), 0o644)
	model := golden.ModelPath("stories260K-f32.gguf")
	args := []string{"distill", "-m", model, "--corpus", corpus, "--seq-len", "16", "--batch", "32", "--steps", "2", "-t", "1", "-o", out, "--install"}
	if _, errOut, code := runCLI(t, args...); code != 2 || !strings.Contains(errOut, "exists") || !strings.Contains(errOut, "--force") {
		t.Fatalf("distill over a file: exit %d, %q", code, errOut)
	}
	if b, _ := os.ReadFile(out); string(b) != "my own file" {
		t.Fatal("the file was overwritten")
	}
	if _, errOut, code := runCLI(t, append(args, "--force")...); code != 0 {
		t.Fatalf("--force: exit %d, %q", code, errOut)
	}
	first, _ := os.ReadFile(out)
	_, errOut, code := runCLI(t, append(args, "--force", "--seed", "2")...)
	if code != 0 || !strings.Contains(errOut, "drafts restore") {
		t.Fatalf("a second install: exit %d, %q", code, errOut)
	}
	st, _ := store.Open()
	m, err := runner.OpenModel(model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	installed := func() []byte { b, _ := os.ReadFile(st.DraftPath(m.Fingerprint)); return b }
	if bytes.Equal(installed(), first) {
		t.Fatal("the second install did not replace the first")
	}
	if _, errOut, code := runCLI(t, "drafts", "restore", m.Name); code != 0 {
		t.Fatalf("drafts restore: exit %d, %q", code, errOut)
	}
	if !bytes.Equal(installed(), first) {
		t.Error("drafts restore did not bring back the first install")
	}
}

// serve says what it keeps on disk, where, and how to turn it off.
func TestServeSaysWhatItKeeps(t *testing.T) {
	m, err := runner.OpenModel(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, c := range []struct {
		mutate func(*runner.Options)
		want   []string
	}{
		{func(*runner.Options) {}, []string{"text memory of the requests", "--adapt-no-save", "--adapt-memory 0", "drafts"}},
		{func(o *runner.Options) { o.Adapt.Engine.MemoryTokens = 0 }, []string{"no text", "--adapt-no-save"}},
		{func(o *runner.Options) { o.Adapt.Save = false }, []string{"keeping nothing"}},
		{func(o *runner.Options) { o.Draft = runner.DraftChoice{Kind: runner.DraftNone} }, []string{"keeping nothing"}},
	} {
		o := runner.DefaultOptions()
		o.Threads, o.Plan = 1, false
		c.mutate(&o)
		r, err := runner.New(m, o)
		if err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		keptOnDisk(&w, r, o)
		r.Close()
		for _, want := range c.want {
			if !strings.Contains(w.String(), want) {
				t.Errorf("%q lacks %q", w.String(), want)
			}
		}
	}
}

var _ = time.Second

// synth counts a shape's bytes before it allocates them: one that does
// not fit in memory is refused in a line naming the shape and the bytes,
// and nothing is written.
func TestSynthRefusesTooLarge(t *testing.T) {
	out := filepath.Join(t.TempDir(), "big.gguf")
	for _, c := range []struct{ shape, want string }{
		{"dim=1000000,layers=1000,heads=1000,ffn=4000000", "shape dim=1000000,layers=1000,heads=1000,kv=1000,ffn=4000000,vocab=32000 in Q8_0 needs 17000076004000000 bytes"},
		{"dim=4611686018427387904,layers=9,heads=1,ffn=9", "needs more than 2^64 bytes"},
	} {
		_, errOut, code := runCLI(t, "synth", "--shape", c.shape, "-o", out)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("synth --shape %s: exit %d, %q", c.shape, code, errOut)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("synth --shape %s wrote %s", c.shape, out)
		}
	}
}

// A truncated saved draft is listed in a row like the others, why it does
// not load below the table; the first run that loads it moves it aside
// with one warning, and later runs say nothing.
func TestTruncatedDraftSetAside(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	m, err := runner.OpenModel("")
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	installAt(t, m.Fingerprint, m.Name)
	st, _ := store.Open()
	path := st.DraftPath(m.Fingerprint)
	raw, _ := os.ReadFile(path)
	os.WriteFile(path, raw[:len(raw)/2], 0o600)
	out, _, _ := runCLI(t, "drafts")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "(unreadable) "+m.Fingerprint+".gguf: ") != strings.Contains(line, "truncated") {
			t.Errorf("drafts: the reason is not on a line of its own:\n%s", out)
		}
	}
	args := []string{"run", "-p", "x", "-n", "2", "--adapt", "off", "--plan=false"}
	_, errOut, code := runCLI(t, args...)
	if code != 0 || strings.Count(errOut, "warning:") != 1 || !strings.Contains(errOut, "moved it to "+path+".corrupt\n") {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	if _, errOut, _ := runCLI(t, args...); strings.Contains(errOut, "warning") {
		t.Errorf("second run warns again:\n%s", errOut)
	}
	out, _, _ = runCLI(t, "drafts")
	if !strings.Contains(out, "(set aside: .gguf.corrupt)  "+m.Fingerprint) || strings.Contains(out, "truncated") {
		t.Errorf("drafts after the draft was set aside:\n%s", out)
	}
}

// nanModel writes a copy of stories260K-f32 whose F32 tensor holds NaN at
// values [from, to), and returns its path.
func nanModel(t *testing.T, tensor string, from, to int) string {
	t.Helper()
	buf, err := os.ReadFile(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("stories260K-f32.gguf", buf)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor(tensor)
	if !ok || ti.Type != quant.F32 {
		t.Fatalf("%s: %v", tensor, ti)
	}
	data := f.TensorData(ti) // a slice of buf
	for i := from; i < to; i++ {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(math.NaN())))
	}
	path := filepath.Join(t.TempDir(), "nan.gguf")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A model whose forward pass gives NaN logits stops with one line naming
// the model, plain or speculative, whether every logit is NaN (the final
// norm's weights) or one that the argmax passes over (one row of the LM
// head): never a run of "88888".
func TestNaNWeightsStop(t *testing.T) {
	for _, c := range []struct {
		name, tensor string
		from, to     int
	}{
		{"all NaN", "output_norm.weight", 0, 64},
		{"one logit NaN", "output.weight", 511 * 64, 512 * 64},
	} {
		model := nanModel(t, c.tensor, c.from, c.to)
		for _, d := range []string{"none", "ngram"} {
			out, errOut, code := runCLI(t, "run", "-m", model, "-p", "Once upon a time", "-n", "8", "--temp", "0", "--draft", d, "--plan=false")
			if code != 1 || !strings.HasPrefix(errOut, "dovetail: nan.gguf: the forward pass produced values that are not numbers (NaN") ||
				strings.Count(strings.TrimSpace(errOut), "\n") > 0 || strings.TrimSpace(out) != "" {
				t.Errorf("%s, --draft %s: exit %d, stdout %q, stderr %q", c.name, d, code, out, errOut)
			}
		}
	}
}
