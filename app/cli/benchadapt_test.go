package cli

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"dovetail/internal/golden"
)

// bench adapt replays a workload per configuration into one CSV row per
// request with the columns the experiments read, and plots τ as a PNG.
func TestBenchAdapt(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.workload.tsv")
	os.WriteFile(wl, []byte("# a comment\nstory\tOnce upon a time\n\nstory\tLily had a ball\ncaps\tTHE DOG RAN\n"), 0o644)
	out, png := filepath.Join(dir, "a.csv"), filepath.Join(dir, "a.png")
	stdout, errOut, code := runCLI(t, "bench", "adapt", "-m", golden.ModelPath("stories260K-f32.gguf"), "--workload", wl,
		"--draft", "scratch", "--mode", "background,per-request", "-n", "12", "--csv", out, "--plot", png)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); !strings.HasPrefix(got, "request,domain,tau,tokens_per_s,draft_version") {
		t.Fatalf("header %q", got)
	}
	if len(rows) != 1+2*3 || rows[3][1] != "caps" || rows[4][5] != "scratch/per-request" {
		t.Fatalf("rows %v", rows)
	}
	// Fixed trees: nothing planned, nothing predicted.
	for _, r := range rows[1:] {
		if r[7] != "0.00" {
			t.Errorf("row %v without --plan: predicted tokens/s %q", r, r[7])
		}
	}
	// With --plan the planner's prediction follows each request.
	_, errOut, code = runCLI(t, "bench", "adapt", "-m", golden.ModelPath("stories260K-f32.gguf"), "--workload", wl,
		"--draft", "scratch", "--mode", "background", "--plan", "-n", "12", "--csv", out)
	if code != 0 {
		t.Fatalf("--plan: exit %d: %s", code, errOut)
	}
	b, _ := os.ReadFile(out)
	planned, _ := csv.NewReader(bytes.NewReader(b)).ReadAll()
	for _, r := range planned[1:] {
		if p, err := strconv.ParseFloat(r[7], 64); err != nil || p <= 0 {
			t.Errorf("row %v with --plan: predicted tokens/s %q", r, r[7])
		}
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("plot: %v", err)
	}
	if !strings.Contains(stdout, "scratch/background") {
		t.Errorf("summary:\n%s", stdout)
	}
	// Bad input names what was wrong.
	for _, tc := range []struct{ args, want string }{
		{"--workload " + filepath.Join(dir, "none.tsv") + " --csv " + out, "none.tsv"},
		{"--mode sometimes --csv " + out, "sometimes"},
		{"--draft scratch --mode off --csv " + out, "scratch"},
		{"--draft x --csv " + out, `"x"`},
		{"", "--csv"},
	} {
		_, errOut, code := runCLI(t, append([]string{"bench", "adapt"}, strings.Fields(tc.args)...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bench adapt %s: exit %d, %q", tc.args, code, errOut)
		}
	}
}
