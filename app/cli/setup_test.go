package cli

import (
	"bufio"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"dovetail/app/runner"
	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
	"dovetail/internal/golden"
)

// probe --json prints exactly one object with the fields the issue names.
func TestProbeJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "probe", "--json", "--quick")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var r map[string]map[string]any
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one object")
	}
	r = map[string]map[string]any{}
	for _, k := range []string{"cpu", "memory"} {
		var v map[string]any
		if err := json.Unmarshal(raw[k], &v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		r[k] = v
	}
	for k, fields := range map[string][]string{"cpu": {"model", "isa", "kernels", "cores", "threads"}, "memory": {"total_bytes", "available_bytes", "bandwidth_gb_s"}} {
		for _, f := range fields {
			if _, ok := r[k][f]; !ok {
				t.Errorf("%s.%s missing", k, f)
			}
		}
	}
	var gpus []map[string]any
	if err := json.Unmarshal(raw["gpus"], &gpus); err != nil || gpus == nil {
		t.Errorf("gpus: %s (%v)", raw["gpus"], err)
	}
}

// setup fits a model, saves its settings (--yes), prints one object per
// model; run then starts from the settings, a flag overriding them; a
// second setup uses the kept calibration, and one whose measurements
// drifted from its predictions calibrates again.
func TestSetup(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	model := golden.ModelPath("stories260K-f32.gguf")
	out, errOut, code := runCLI(t, "setup", "-m", model, "--yes", "--json")
	if code != 0 || !strings.Contains(errOut, "calibrating") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var res struct {
		Model     string
		Placement map[string]any
		Memory    struct {
			CPUBytes uint64  `json:"cpu_bytes"`
			GPUBytes *uint64 `json:"gpu_bytes"`
			Parts    []runner.Part
		}
		Fit       string
		Predicted struct {
			Plain float64 `json:"plain_tokens_per_s"`
			With  float64 `json:"tokens_per_s"`
			Low   float64 `json:"low"`
			High  float64 `json:"high"`
		}
		SettingsFile string `json:"settings_file"`
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		n++
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
	}
	// On a machine with a GPU the target's layers go there (--gpu-layers
	// auto), and the verdict says so.
	onGPU := slices.ContainsFunc(res.Memory.Parts, func(p runner.Part) bool { return p.Device != "cpu" })
	if n != 1 || res.Model != "stories260K-f32.gguf" || (res.Fit == runner.FitsCPU) == onGPU || res.SettingsFile == "" || res.Memory.CPUBytes == 0 ||
		res.Memory.GPUBytes == nil || len(res.Memory.Parts) < 4 || !(res.Predicted.Plain > 0 && res.Predicted.Low <= res.Predicted.With && res.Predicted.With <= res.Predicted.High) {
		t.Fatalf("%d objects, the last %+v", n, res)
	}
	for _, k := range []string{"threads", "draft_device", "trainer_device", "gpu_layers", "ctx", "tree"} {
		if _, ok := res.Placement[k]; !ok {
			t.Errorf("placement.%s missing", k)
		}
	}
	// run starts from them, and says so; a flag beats them.
	_, errOut, code = runCLI(t, "run", "-m", model, "-p", "Once", "-n", "4", "--temp", "0")
	if code != 0 || !strings.Contains(errOut, "settings: threads") || !strings.Contains(errOut, "ctx 128") {
		t.Fatalf("run after setup: exit %d\n%s", code, errOut)
	}
	_, errOut, _ = runCLI(t, "run", "-m", model, "-p", "Once", "-n", "4", "--temp", "0", "--ctx", "64", "--draft", "none")
	if strings.Contains(errOut, "ctx 128") || strings.Contains(errOut, "draft auto") || !strings.Contains(errOut, "settings: threads") {
		t.Fatalf("flags did not override the settings:\n%s", errOut)
	}
	// The calibration is kept.
	if _, errOut, _ = runCLI(t, "setup", "-m", model, "--yes"); strings.Contains(errOut, "calibrating") {
		t.Errorf("calibrated again without cause:\n%s", errOut)
	}
	// Runs measured at half the prediction: calibrate again.
	st, _ := store.Open()
	m, err := runner.OpenModel(model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for range 3 {
		if err := runner.AppendRecord(st, m.Fingerprint, runner.Record{At: time.Now(), Predicted: 1000, Measured: 500, Tokens: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if _, errOut, _ = runCLI(t, "setup", "-m", model, "--yes"); !strings.Contains(errOut, "0.50× the prediction") || !strings.Contains(errOut, "calibrating again") {
		t.Errorf("a drifted model was not calibrated again:\n%s", errOut)
	}
}

// A model that does not exist is named; setup goes on with the others.
func TestSetupBadModel(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	_, errOut, code := runCLI(t, "setup", "-m", "/nonexistent.gguf", "--yes")
	if code == 0 || !strings.Contains(errOut, "nonexistent.gguf") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}

// setup --vram plans for a card that is not here: the fit names it, and
// nothing is saved even with --yes; a size that is not one is a usage
// error naming the flag.
func TestSetupPlansForACard(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	model := golden.ModelPath("stories260K-f32.gguf")
	out, errOut, code := runCLI(t, "setup", "-m", model, "--yes", "--json", "--vram", "8GiB")
	if code != 0 || !strings.Contains(errOut, "planning for an NVIDIA card with 8.0 GiB at an assumed 448 GB/s (an RTX 2080's; the Dovetail paper's RTX 2080 SUPER is rated 496), not this machine's GPUs: nothing is saved") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var res struct {
		Reason       string
		SettingsFile string           `json:"settings_file"`
		GPUs         []runner.GPUPlan `json:"gpu_arithmetic"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Reason, "the planned 8.0 GiB card") || res.SettingsFile != "" {
		t.Fatalf("reason %q, settings %q", res.Reason, res.SettingsFile)
	}
	// The arithmetic names the card and says why its layers stay on the
	// CPU (they are too small to gain from it).
	if len(res.GPUs) != 1 || res.GPUs[0].Device != "the planned 8.0 GiB card" || res.GPUs[0].FreeBytes != 8<<30 ||
		res.GPUs[0].ReserveBytes != 512<<20 || res.GPUs[0].GPULayers != 0 || !strings.Contains(res.GPUs[0].Stop, "run faster there") {
		t.Errorf("gpu_arithmetic %+v", res.GPUs)
	}
	for _, bad := range []string{"lots", "1MiB", "-8GiB"} {
		if _, errOut, code := runCLI(t, "setup", "-m", model, "--vram", bad); code != 2 || !strings.Contains(errOut, "--vram") {
			t.Errorf("--vram %s: exit %d, %q", bad, code, errOut)
		}
	}
}

// setup --vram with --vram-bandwidth, --tau and --gpu-layers: the card's
// bandwidth is in the arithmetic, the prediction is at the τ asked for
// with its speedups over the CPU alone, in --json and the table; bad
// values are usage errors naming their flag.
func TestSetupPredictsAtTau(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	model := golden.ModelPath("stories260K-f32.gguf")
	out, errOut, code := runCLI(t, "setup", "-m", model, "--json", "--vram", "8GiB", "--vram-bandwidth", "1TB/s", "--tau", "3.0,3.5", "--gpu-layers", "0")
	if code != 0 || !strings.Contains(errOut, "planning for an NVIDIA card with 8.0 GiB at 1000 GB/s") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var res struct {
		Placement runner.Placement
		Predicted map[string]float64
		GPUs      []runner.GPUPlan `json:"gpu_arithmetic"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"plain_tokens_per_s", "tokens_per_s", "low", "high", "tau", "cpu_only_tokens_per_s", "speedup_plain", "speedup", "speedup_low", "speedup_high", "step_ms"} {
		if v, ok := res.Predicted[k]; !ok || v <= 0 {
			t.Errorf("predicted.%s = %v (present %v)", k, v, ok)
		}
	}
	if p := res.Predicted; p["assumed_tau_low"] != 3 || p["assumed_tau_high"] != 3.5 || p["plain_tokens_per_s"] != p["cpu_only_tokens_per_s"] {
		t.Errorf("predicted %v", p)
	}
	if len(res.GPUs) != 1 || res.GPUs[0].BandwidthGBs != 1000 || res.Placement.GPULayers != 0 {
		t.Errorf("gpu_arithmetic %+v, %d layers", res.GPUs, res.Placement.GPULayers)
	}
	out, _, code = runCLI(t, "setup", "-m", model, "--vram", "8GiB", "--tau", "3")
	if code != 0 || !strings.Contains(out, "with the draft at τ 3.00–3.00") || !strings.Contains(out, "with every layer on the CPU") {
		t.Errorf("the table at --tau 3: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--vram", "8GiB", "--vram-bandwidth", "fast"}, {"--vram", "8GiB", "--vram-bandwidth", "0.5GB/s"},
		{"--vram", "8GiB", "--vram-bandwidth", "-448GB/s"}, {"--vram-bandwidth", "448GB/s"},
		{"--tau", "0.5"}, {"--tau", "3.5,3"}, {"--tau", "lots"}, {"--gpu-layers", "many"}, {"--gpu-layers", "-2"}} {
		flag := strings.TrimPrefix(bad[len(bad)-2], "--")
		_, errOut, code := runCLI(t, append([]string{"setup", "-m", model}, bad...)...)
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code != 2 || len(lines) != 1 || !strings.Contains(errOut, "--"+flag) {
			t.Errorf("%v: exit %d, %q", bad, code, errOut)
		}
	}
}

// probe's text says a GPU's peak memory bandwidth and what the driver
// gave it from.
func TestProbePrintsGPUBandwidth(t *testing.T) {
	var b strings.Builder
	printProbe(&b, probe.Report{GPUs: []probe.GPU{{Name: "RTX 2080 SUPER", MemoryBandwidthGBs: 496.064, MemoryClockKHz: 7751000, MemoryBusBits: 256}}})
	if !strings.Contains(b.String(), "memory 496 GB/s at its peak (7751 MHz, 256 bits)") {
		t.Errorf("probe printed:\n%s", b.String())
	}
}
