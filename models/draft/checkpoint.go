package draft

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc64"
	"math"
	"sort"
	"strings"
	"unsafe"

	"dovetail/models/gguf"
	"dovetail/quant"
)

// Arch is the GGUF architecture of a draft checkpoint.
const Arch = "dovetail-draft"

// OptimizerPrefixes name the optional AdamW moments of a tensor X:
// "adam.m.X" and "adam.v.X", kept so that training can resume.
const (
	PrefixAdamM = "adam.m."
	PrefixAdamV = "adam.v."
)

// Checkpoint is a draft model as stored: its shape, its tensors, and the
// target it belongs to.
type Checkpoint struct {
	Config      Config
	Fingerprint string // the target's (see Fingerprint)
	TargetName  string // for messages only
	// Tensors holds every tensor of Config.Shapes by name, row-major, and
	// optionally optimizer moments (PrefixAdamM/PrefixAdamV + name).
	Tensors map[string][]float32
	// Meta is free-form state (the trainer's resume point), kept as written.
	Meta map[string]string
}

const (
	keyPrefix   = Arch + "."
	keyFP       = keyPrefix + "target.fingerprint"
	keyTarget   = keyPrefix + "target.name"
	keyChecksum = keyPrefix + "checksum"
	keyMeta     = keyPrefix + "meta."
	keyKind     = keyPrefix + "kind" // absent: a DGF
	keyFCBias   = keyPrefix + "fc_bias"
)

// configKeys maps each integer config value to its metadata key.
func configKeys(c *Config) []struct {
	key string
	v   *int
} {
	return []struct {
		key string
		v   *int
	}{
		{"embedding_length", &c.Hidden},
		{"block_count", &c.Blocks},
		{"attention.head_count", &c.Heads},
		{"attention.head_count_kv", &c.KVHeads},
		{"attention.key_length", &c.HeadDim},
		{"feed_forward_length", &c.FFN},
		{"vocab_size", &c.Vocab},
		{"context_length", &c.Context},
	}
}

// WriteFile writes the checkpoint atomically (temporary file, fsync,
// rename): an interrupted write never replaces a good checkpoint.
func (c *Checkpoint) WriteFile(path string) error {
	w, err := c.writer()
	if err != nil {
		return err
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("writing draft %s: %w", path, err)
	}
	return nil
}

func (c *Checkpoint) writer() (*gguf.Writer, error) {
	if err := c.Config.Validate(); err != nil {
		return nil, err
	}
	if c.Config.Kind == EAGLE3 {
		// It never trains here: it lives in the checkpoint it was published as.
		return nil, fmt.Errorf("draft: a %s draft is not saved as a Dovetail checkpoint", c.Config.Kind)
	}
	names, err := c.tensorOrder()
	if err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", Arch)
	w.Set("general.name", "Dovetail draft for "+c.TargetName)
	cfg := c.Config
	for _, k := range configKeys(&cfg) {
		w.Set(keyPrefix+k.key, *k.v)
	}
	if cfg.Kind == EAGLE1 {
		// An adapted EAGLE-1 draft (fc and layers; the target's embeddings
		// and head, as the DGF's).
		w.Set(keyKind, cfg.Kind.String())
		w.Set(keyFCBias, cfg.FCBias)
	}
	w.Set(keyPrefix+"rope.freq_base", cfg.RopeTheta)
	w.Set(keyPrefix+"attention.layer_norm_rms_epsilon", cfg.RMSEps)
	w.Set(keyFP, c.Fingerprint)
	w.Set(keyTarget, c.TargetName)
	metaKeys := make([]string, 0, len(c.Meta))
	for k := range c.Meta {
		metaKeys = append(metaKeys, k)
	}
	sort.Strings(metaKeys)
	for _, k := range metaKeys {
		w.Set(keyMeta+k, c.Meta[k])
	}
	sum := crc64.New(crcTable)
	checksumHeader(sum, c.Config, c.Fingerprint)
	shapes := shapeIndex(c.Config)
	for _, name := range names {
		s := shapes[baseName(name)]
		data := f32Bytes(c.Tensors[name])
		checksumTensor(sum, name, data)
		if err := w.AddTensor(name, quant.F32, []uint64{uint64(s.Cols), uint64(s.Rows)}, data); err != nil {
			return nil, err
		}
	}
	w.Set(keyChecksum, fmt.Sprintf("%016x", sum.Sum64()))
	return w, nil
}

// tensorOrder checks the tensors against the config and lists them: the
// draft's in Shapes order, then optimizer state.
func (c *Checkpoint) tensorOrder() ([]string, error) {
	shapes := shapeIndex(c.Config)
	var names, extra []string
	for _, s := range c.Config.Shapes() {
		v, ok := c.Tensors[s.Name]
		if !ok {
			return nil, fmt.Errorf("draft checkpoint: tensor %s missing", s.Name)
		}
		if len(v) != s.Size() {
			return nil, fmt.Errorf("draft checkpoint: tensor %s has %d values, want %d", s.Name, len(v), s.Size())
		}
		names = append(names, s.Name)
	}
	for name, v := range c.Tensors {
		if _, ok := shapes[name]; ok {
			continue
		}
		s, ok := shapes[baseName(name)]
		if !ok || baseName(name) == name {
			return nil, fmt.Errorf("draft checkpoint: unknown tensor %s", name)
		}
		if len(v) != s.Size() {
			return nil, fmt.Errorf("draft checkpoint: tensor %s has %d values, want %d", name, len(v), s.Size())
		}
		extra = append(extra, name)
	}
	sort.Strings(extra)
	return append(names, extra...), nil
}

// baseName strips an optimizer prefix.
func baseName(name string) string {
	for _, p := range []string{PrefixAdamM, PrefixAdamV} {
		if b, ok := strings.CutPrefix(name, p); ok {
			return b
		}
	}
	return name
}

func shapeIndex(c Config) map[string]Shape {
	m := map[string]Shape{}
	for _, s := range c.Shapes() {
		m[s.Name] = s
	}
	return m
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// checksumTensor feeds a tensor's name, length and bytes to the checksum,
// so that a renamed or moved tensor is caught as well as a flipped bit.
func checksumTensor(h interface{ Write([]byte) (int, error) }, name string, data []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write([]byte(name))
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	h.Write(n[:])
	h.Write(data)
}

// checksumHeader covers the shape and the target, so that a damaged
// header reads as damage rather than as a draft for another model.
func checksumHeader(h interface{ Write([]byte) (int, error) }, c Config, fingerprint string) {
	// The DGF's fields as the checksum has always printed them, so that
	// drafts saved before EAGLE's fields existed still check; an EAGLE
	// draft's kind after them.
	type dgfFields struct {
		Hidden, Blocks, Heads, KVHeads, HeadDim, FFN, Vocab, Context int
		RopeTheta, RMSEps                                            float32
	}
	head := fmt.Sprintf("%+v", dgfFields{c.Hidden, c.Blocks, c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.Vocab, c.Context, c.RopeTheta, c.RMSEps})
	if c.Kind != DGF {
		head += fmt.Sprintf(" kind %s fc bias %t", c.Kind, c.FCBias)
	}
	checksumTensor(h, "header", []byte(head+" "+fingerprint))
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// Load reads a checkpoint file. A damaged file (truncated, or any byte of
// its tensors changed) is an error naming the file.
func Load(path string) (*Checkpoint, error) { return open(path, true) }

// Check reads a checkpoint file as Load does, with every check Load makes,
// but keeps none of its tensors (the checkpoint it returns has none): what
// listing or replacing a saved draft needs, without a float32 copy of it.
func Check(path string) (*Checkpoint, error) { return open(path, false) }

func open(path string, keep bool) (*Checkpoint, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("draft checkpoint: %w", err)
	}
	defer f.Close()
	return fromGGUF(f, keep)
}

// Parse reads a checkpoint held in memory (an embedded draft); name is
// used in errors.
func Parse(name string, buf []byte) (*Checkpoint, error) {
	f, err := gguf.Parse(name, buf)
	if err != nil {
		return nil, fmt.Errorf("draft checkpoint: %w", err)
	}
	return fromGGUF(f, true)
}

// fromGGUF reads a checkpoint from f, its tensors' values too if keep.
func fromGGUF(f *gguf.File, keep bool) (*Checkpoint, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("draft checkpoint %s: %s", f.Path, fmt.Sprintf(format, args...))
	}
	if a, _ := f.String("general.architecture"); a != Arch {
		return nil, bad("architecture %q, want %q: not a Dovetail draft", a, Arch)
	}
	c := &Checkpoint{Tensors: map[string][]float32{}, Meta: map[string]string{}}
	for _, k := range configKeys(&c.Config) {
		v, ok := f.Uint(keyPrefix + k.key)
		if !ok || v > 1<<30 {
			return nil, bad("metadata %s%s missing or invalid", keyPrefix, k.key)
		}
		*k.v = int(v)
	}
	theta, ok1 := f.Float(keyPrefix + "rope.freq_base")
	eps, ok2 := f.Float(keyPrefix + "attention.layer_norm_rms_epsilon")
	if !ok1 || !ok2 {
		return nil, bad("RoPE base or RMS epsilon missing")
	}
	c.Config.RopeTheta, c.Config.RMSEps = float32(theta), float32(eps)
	switch kind, _ := f.String(keyKind); kind {
	case "", DGF.String():
	case EAGLE1.String():
		c.Config.Kind = EAGLE1
		c.Config.FCBias, _ = f.Bool(keyFCBias)
	default:
		return nil, bad("draft kind %q: want %s or %s", kind, DGF, EAGLE1)
	}
	if err := c.Config.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	var ok bool
	if c.Fingerprint, ok = f.String(keyFP); !ok || c.Fingerprint == "" {
		return nil, bad("target fingerprint missing")
	}
	c.TargetName, _ = f.String(keyTarget)
	want, ok := f.String(keyChecksum)
	if !ok {
		return nil, bad("checksum missing")
	}
	for _, kv := range f.KVs {
		if k, ok := strings.CutPrefix(kv.Key, keyMeta); ok {
			s, isStr := kv.Value.(string)
			if !isStr {
				return nil, bad("metadata %s is not a string", kv.Key)
			}
			c.Meta[k] = s
		}
	}
	shapes := shapeIndex(c.Config)
	sum := crc64.New(crcTable)
	checksumHeader(sum, c.Config, c.Fingerprint)
	nonFinite := map[string]float32{} // the draft's tensors' first NaN or ±Inf
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		s, ok := shapes[baseName(ti.Name)]
		if !ok {
			return nil, bad("unknown tensor %s", ti.Name)
		}
		if ti.Type != quant.F32 || len(ti.Dims) != 2 || ti.Dims[0] != uint64(s.Cols) || ti.Dims[1] != uint64(s.Rows) {
			return nil, bad("tensor %s is %v %v, want F32 [%d %d]", ti.Name, ti.Type, ti.Dims, s.Cols, s.Rows)
		}
		data := f.TensorData(ti)
		checksumTensor(sum, ti.Name, data)
		var v []float32
		if keep {
			v = make([]float32, s.Size())
		}
		for j := range s.Size() {
			x := math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
			if keep {
				v[j] = x
			}
			if _, seen := nonFinite[ti.Name]; !seen && (math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)) {
				nonFinite[ti.Name] = x
			}
		}
		c.Tensors[ti.Name] = v
	}
	if got := fmt.Sprintf("%016x", sum.Sum64()); got != want {
		return nil, bad("checksum %s does not match the tensors' %s: the file is damaged", want, got)
	}
	for _, s := range c.Config.Shapes() {
		if _, ok := c.Tensors[s.Name]; !ok {
			return nil, bad("tensor %s missing", s.Name)
		}
		if x, ok := nonFinite[s.Name]; ok {
			return nil, bad("tensor %s holds %v", s.Name, x)
		}
	}
	if !keep {
		c.Tensors = nil
	}
	return c, nil
}

// CheckTarget returns an error unless the checkpoint was made for the
// target with this fingerprint.
func (c *Checkpoint) CheckTarget(fingerprint, targetName string) error {
	if c.Fingerprint != fingerprint {
		return fmt.Errorf("this draft was trained for another model (%q, fingerprint %s), not for %q (fingerprint %s)",
			c.TargetName, c.Fingerprint, targetName, fingerprint)
	}
	return nil
}

// Fingerprint identifies a target model by what a draft depends on: its
// architecture, every tensor's name, type and shape, and its vocabulary.
// It does not read tensor data, so it is instant on large models; the same
// weights in another quantization are another target.
func Fingerprint(f *gguf.File) string {
	h := sha256.New()
	put := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	arch, _ := f.String("general.architecture")
	put(arch)
	for _, t := range f.Tensors {
		put(t.Name)
		put(fmt.Sprint(t.Type, t.Dims))
	}
	model, _ := f.String("tokenizer.ggml.model")
	put(model)
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	for _, t := range toks {
		put(t)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
