// Package torchbin reads PyTorch state dicts as torch.save writes them
// (pytorch_model.bin: a zip holding data.pkl, a pickle of the tensors'
// names, shapes and storages, and one raw little-endian file per storage):
// EAGLE's own releases are published that way. The pickle is read with
// gopickle's unpickler, which builds objects from a fixed set of classes
// and never runs code; the storages are taken as their raw bytes, so that
// each tensor comes out as the safetensors package's Tensor of the same
// dtype and the rest of a loader reads both formats alike.
package torchbin

import (
	"archive/zip"
	"fmt"
	"io"
	"path"
	"slices"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"

	"dovetail/models/safetensors"
)

// FileName and IndexName are the names Hugging Face gives a PyTorch
// checkpoint and the index of its shards.
const (
	FileName  = "pytorch_model.bin"
	IndexName = FileName + ".index.json"
)

// storageTypes maps torch's storage classes to safetensors' dtypes.
var storageTypes = map[string]string{
	"FloatStorage": "F32", "HalfStorage": "F16", "BFloat16Storage": "BF16", "DoubleStorage": "F64",
	"LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8",
	"ByteStorage": "U8", "BoolStorage": "BOOL",
}

// storageClass is a torch storage class the pickle names.
type storageClass struct{ dtype string }

// storage is one storage the pickle refers to: its record in the zip.
type storage struct {
	dtype string
	key   string
	numel int
}

// tensor is what _rebuild_tensor_v2 makes of its arguments.
type tensor struct {
	st             *storage
	offset         int
	shape, strides []int
}

// rebuild is torch._utils._rebuild_tensor_v2.
type rebuild struct{}

func (rebuild) Call(args ...any) (any, error) {
	// (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
	if len(args) < 6 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 with %d arguments", len(args))
	}
	st, ok1 := args[0].(*storage)
	off, ok2 := args[1].(int)
	size, ok3 := args[2].(*types.Tuple)
	stride, ok4 := args[3].(*types.Tuple)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 with arguments of unexpected types")
	}
	t := &tensor{st: st, offset: off}
	var err error
	if t.shape, err = ints(size); err == nil {
		t.strides, err = ints(stride)
	}
	return t, err
}

func ints(t *types.Tuple) ([]int, error) {
	out := make([]int, t.Len())
	for i := range out {
		v, ok := t.Get(i).(int)
		if !ok || v < 0 {
			return nil, fmt.Errorf("a tensor's size or stride holds %v", t.Get(i))
		}
		out[i] = v
	}
	return out, nil
}

// findClass admits only the classes a state dict is made of.
func findClass(module, name string) (any, error) {
	switch module + "." + name {
	case "torch._utils._rebuild_tensor_v2":
		return rebuild{}, nil
	case "collections.OrderedDict":
		return &types.OrderedDictClass{}, nil
	}
	if dt, ok := storageTypes[name]; ok && module == "torch" {
		return &storageClass{dtype: dt}, nil
	}
	return nil, fmt.Errorf("the pickle names %s.%s, which a state dict of tensors does not hold", module, name)
}

// Read reads the tensors of the PyTorch checkpoint at path, their values
// too when data (else only names, dtypes and shapes: Data is nil).
func Read(path string, data bool) (map[string]*safetensors.Tensor, error) {
	a, err := openArchive(path)
	if err != nil {
		return nil, err
	}
	defer a.z.Close()
	entries, err := stateDict(a.obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]*safetensors.Tensor{}
	for name, t := range entries {
		st, err := toTensor(name, t, a.records, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		st.File = path
		out[name] = st
	}
	return out, nil
}

// archive is an open torch.save zip: its unpickled object and its
// storages' records.
type archive struct {
	z       *zip.ReadCloser
	obj     any
	records map[string]*zip.File
}

func openArchive(file string) (*archive, error) {
	z, err := zip.OpenReader(file)
	if err != nil {
		return nil, fmt.Errorf("%s: not a PyTorch zip checkpoint (torch.save of PyTorch 1.6 or later): %v", file, err)
	}
	a := &archive{z: z, records: map[string]*zip.File{}}
	var pkl *zip.File
	for _, f := range z.File {
		dir, base := path.Split(f.Name)
		switch {
		case base == "data.pkl":
			pkl = f
		case path.Base(dir) == "data":
			a.records[base] = f
		}
	}
	if pkl == nil {
		z.Close()
		return nil, fmt.Errorf("%s: no data.pkl: not a PyTorch checkpoint", file)
	}
	if a.obj, err = unpickle(pkl); err != nil {
		z.Close()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return a, nil
}

// unpickle reads data.pkl.
func unpickle(pkl *zip.File) (any, error) {
	r, err := pkl.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	u := pickle.NewUnpickler(r)
	u.FindClass = findClass
	u.PersistentLoad = persistentLoad
	obj, err := u.Load()
	if err != nil {
		return nil, fmt.Errorf("data.pkl: %v", err)
	}
	return obj, nil
}

// stateDict is obj as a dict of names to tensors.
func stateDict(obj any) (map[string]*tensor, error) {
	out := map[string]*tensor{}
	add := func(k, v any) error {
		name, ok := k.(string)
		t, ok2 := v.(*tensor)
		if !ok || !ok2 {
			return fmt.Errorf("data.pkl: entry %v is not a named tensor: the file is not a state dict", k)
		}
		out[name] = t
		return nil
	}
	switch d := obj.(type) {
	case *types.OrderedDict:
		for e := d.List.Front(); e != nil; e = e.Next() {
			ent := e.Value.(*types.OrderedDictEntry)
			if err := add(ent.Key, ent.Value); err != nil {
				return nil, err
			}
		}
	case *types.Dict:
		for _, ent := range *d {
			if err := add(ent.Key, ent.Value); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("data.pkl holds %T, not a state dict", obj)
	}
	return out, nil
}

// persistentLoad is a storage reference: ('storage', class, key,
// location, numel).
func persistentLoad(id any) (any, error) {
	t, ok := id.(*types.Tuple)
	if !ok || t.Len() < 5 {
		return nil, fmt.Errorf("a persistent id %v that is not a storage", id)
	}
	kind, _ := t.Get(0).(string)
	cls, ok1 := t.Get(1).(*storageClass)
	key, ok2 := t.Get(2).(string)
	numel, ok3 := t.Get(4).(int)
	if kind != "storage" || !ok1 || !ok2 || !ok3 || numel < 0 {
		return nil, fmt.Errorf("a persistent id %v that is not a storage", id)
	}
	return &storage{dtype: cls.dtype, key: key, numel: numel}, nil
}

// toTensor checks t (row-major, inside its storage) and reads its bytes
// when data.
func toTensor(name string, t *tensor, records map[string]*zip.File, data bool) (*safetensors.Tensor, error) {
	es := elemSize(t.st.dtype)
	n := 1
	for _, d := range t.shape {
		n *= d
	}
	want := 1
	for i := len(t.shape) - 1; i >= 0; i-- {
		if t.shape[i] > 1 && (i >= len(t.strides) || t.strides[i] != want) {
			return nil, fmt.Errorf("tensor %q: strides %v for shape %v are not row-major", name, t.strides, t.shape)
		}
		want *= t.shape[i]
	}
	if t.offset+n > t.st.numel {
		return nil, fmt.Errorf("tensor %q: %d values from %d run past its storage of %d", name, n, t.offset, t.st.numel)
	}
	out := &safetensors.Tensor{Name: name, DType: t.st.dtype, Shape: slices.Clone(t.shape)}
	if !data {
		return out, nil
	}
	rec := records[t.st.key]
	if rec == nil {
		return nil, fmt.Errorf("tensor %q: storage %s is missing from the archive", name, t.st.key)
	}
	if rec.UncompressedSize64 != uint64(t.st.numel*es) {
		return nil, fmt.Errorf("tensor %q: storage %s holds %d bytes, want %d", name, t.st.key, rec.UncompressedSize64, t.st.numel*es)
	}
	r, err := rec.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if _, err := io.CopyN(io.Discard, r, int64(t.offset*es)); err != nil {
		return nil, fmt.Errorf("tensor %q: %v", name, err)
	}
	out.Data = make([]byte, n*es)
	if _, err := io.ReadFull(r, out.Data); err != nil {
		return nil, fmt.Errorf("tensor %q: %v", name, err)
	}
	return out, nil
}

func elemSize(dtype string) int {
	switch dtype {
	case "F64", "I64":
		return 8
	case "F32", "I32":
		return 4
	case "F16", "BF16", "I16":
		return 2
	}
	return 1
}
