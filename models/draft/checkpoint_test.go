package draft

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"dovetail/internal/golden"
	"dovetail/models/gguf"
)

var small = Config{Hidden: 8, Blocks: 2, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 16, Context: 64,
	RopeTheta: 10000, RMSEps: 1e-5}

func randomCheckpoint(seed uint64, withOptimizer bool) *Checkpoint {
	rng := rand.New(rand.NewPCG(seed, 1))
	ck := &Checkpoint{Config: small, Fingerprint: "0123456789abcdef0123456789abcdef", TargetName: "test target",
		Tensors: map[string][]float32{}, Meta: map[string]string{"adam.step": "7", "note": "hello"}}
	for _, s := range small.Shapes() {
		v := make([]float32, s.Size())
		for i := range v {
			v[i] = rng.Float32() - 0.5
		}
		ck.Tensors[s.Name] = v
		if withOptimizer {
			ck.Tensors[PrefixAdamM+s.Name] = v
			ck.Tensors[PrefixAdamV+s.Name] = v
		}
	}
	return ck
}

func TestRoundTrip(t *testing.T) {
	for _, opt := range []bool{false, true} {
		ck := randomCheckpoint(1, opt)
		path := filepath.Join(t.TempDir(), "d.gguf")
		if err := ck.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ck, got); diff != "" {
			t.Errorf("optimizer %v: round trip differs (-written +read):\n%s", opt, diff)
		}
		checked, err := Check(path)
		want := *ck
		want.Tensors = nil
		if err != nil || !cmp.Equal(&want, checked) {
			t.Errorf("optimizer %v: Check: %v, %s", opt, err, cmp.Diff(&want, checked))
		}
		buf, _ := os.ReadFile(path)
		if _, err := Parse("mem", buf); err != nil {
			t.Errorf("Parse: %v", err)
		}
	}
}

// Any damage is an error naming the file: truncation at every length, and
// a changed byte anywhere in the header or the tensors.
func TestDamagedFile(t *testing.T) {
	ck := randomCheckpoint(2, false)
	dir := t.TempDir()
	path := filepath.Join(dir, "d.gguf")
	if err := ck.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	dataStart := int(f.DataOffset)
	f.Close()
	for n := 0; n < len(good); n += 1 + n/8 {
		if _, err := Parse("truncated", good[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
		}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for range 200 {
		bad := append([]byte(nil), good...)
		i := dataStart + rng.IntN(len(good)-dataStart)
		bad[i] ^= byte(1 + rng.IntN(255))
		if _, err := Parse("corrupt", bad); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("byte %d of the tensor data changed: error %v", i, err)
		}
	}
	// Header bytes: either the parse fails or what it reads is refused;
	// never a panic. (Some header bytes, such as the name's text, are
	// harmless to change.)
	for i := range dataStart {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0xff
		Parse("header", bad)
	}
	path2 := filepath.Join(dir, "bad.gguf")
	bad := append([]byte(nil), good...)
	bad[len(bad)-3] ^= 1
	os.WriteFile(path2, bad, 0o644)
	for name, read := range map[string]func(string) (*Checkpoint, error){"Load": Load, "Check": Check} {
		if _, err := read(path2); err == nil || !strings.Contains(err.Error(), path2) || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("%s of a damaged file: %v", name, err)
		}
	}
}

// A draft's weight that is not finite, checksum and all, is refused by
// Load and Check alike.
func TestNonFiniteWeight(t *testing.T) {
	for _, x := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		ck := randomCheckpoint(4, false)
		name := small.Shapes()[1].Name
		ck.Tensors[name][5] = x
		path := filepath.Join(t.TempDir(), "d.gguf")
		if err := ck.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		for _, read := range []func(string) (*Checkpoint, error){Load, Check} {
			if _, err := read(path); err == nil || !strings.Contains(err.Error(), "tensor "+name+" holds") {
				t.Errorf("%v in %s: %v", x, name, err)
			}
		}
	}
}

func TestWrongTarget(t *testing.T) {
	ck := randomCheckpoint(4, false)
	if err := ck.CheckTarget(ck.Fingerprint, "x"); err != nil {
		t.Fatal(err)
	}
	err := ck.CheckTarget("ffffffffffffffffffffffffffffffff", "other model")
	if err == nil || !strings.Contains(err.Error(), "another model") || !strings.Contains(err.Error(), "other model") {
		t.Errorf("wrong target: %v", err)
	}
}

// Fingerprints tell models apart (another quantization of the same
// weights is another target) and are stable.
func TestFingerprint(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"stories260K-f32.gguf", "stories260K-Q8_0-mixed.gguf", "tinystories656K-Q8_0.gguf", "tinystories656K-f32.gguf"} {
		f, err := gguf.Open(golden.ModelPath(name))
		if err != nil {
			t.Fatal(err)
		}
		fp := Fingerprint(f)
		f.Close()
		if other, dup := seen[fp]; dup {
			t.Errorf("%s and %s share fingerprint %s", name, other, fp)
		}
		seen[fp] = name
		if len(fp) != 32 {
			t.Errorf("%s: fingerprint %q", name, fp)
		}
	}
	f, _ := gguf.Open(golden.ModelPath("stories260K-f32.gguf"))
	defer f.Close()
	if a, b := Fingerprint(f), Fingerprint(f); a != b {
		t.Errorf("fingerprint not stable: %s, %s", a, b)
	}
}

func TestConfigShapes(t *testing.T) {
	if err := small.Validate(); err != nil {
		t.Fatal(err)
	}
	// Block 0 has no input norm; every other block has one.
	n := 0
	for _, s := range small.Shapes() {
		if strings.HasSuffix(s.Name, "attn_norm.weight") {
			n++
		}
	}
	if n != small.Blocks-1 {
		t.Errorf("%d attention norms in %d blocks", n, small.Blocks)
	}
	bad := small
	bad.HeadDim = 3
	if bad.Validate() == nil {
		t.Error("odd head dimension accepted")
	}
}

// An adapted EAGLE-1 draft saves and loads as a DGF does, its kind and
// fc's bias kept; an EAGLE-3 draft (which never trains here) is refused.
func TestEAGLECheckpoints(t *testing.T) {
	e1 := small
	e1.Kind, e1.FCBias = EAGLE1, true
	ck := &Checkpoint{Config: e1, Fingerprint: "0123456789abcdef0123456789abcdef", Tensors: map[string][]float32{}}
	for _, s := range e1.Shapes() {
		ck.Tensors[s.Name] = make([]float32, s.Size())
	}
	path := filepath.Join(t.TempDir(), "e1.gguf")
	if err := ck.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config != e1 {
		t.Fatalf("loaded %+v, saved %+v", got.Config, e1)
	}
	e3 := small
	e3.Kind, e3.Blocks = EAGLE3, 1
	ck3 := &Checkpoint{Config: e3, Fingerprint: ck.Fingerprint, Tensors: map[string][]float32{}}
	if err := ck3.WriteFile(filepath.Join(t.TempDir(), "e3.gguf")); err == nil || !strings.Contains(err.Error(), "eagle3") {
		t.Fatalf("an EAGLE-3 checkpoint: %v, want a refusal naming it", err)
	}
}
