package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"dovetail/internal/mapfile"
	"dovetail/quant"
)

// maxArrayDepth bounds nesting so that a crafted file cannot recurse deeply.
const maxArrayDepth = 8

// File is an open GGUF file.
type File struct {
	Path      string
	Version   uint32
	KVs       []KV
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is where the tensor data section starts in the file.
	DataOffset uint64

	kv      map[string]int
	tensors map[string]int
	data    []byte // the tensor data section
	unmap   func() error
	mapped  bool // data is a read-only file mapping (Open on unix)
}

// Open memory-maps path and parses its header. Close releases the mapping;
// slices returned by TensorData are invalid after it.
func Open(path string) (*File, error) {
	buf, unmap, err := mapfile.Open(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, buf)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	f.mapped = mapfile.Mapped
	return f, nil
}

// Evict tells the OS that b, a slice of this file's tensor data, will not
// be read soon: where the file is memory-mapped its whole pages leave the
// process's memory, and are read back from the file if touched again. A
// caller that keeps its own copy of a tensor (the CPU kernels' packed
// weights) evicts the original, so the model is not held twice. Elsewhere,
// or for bytes outside the mapping, Evict does nothing: memory that is not
// a file mapping must never be dropped.
func (f *File) Evict(b []byte) {
	if !f.mapped || len(b) == 0 || len(f.data) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(f.data)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(f.data)) {
		return
	}
	mapfile.Evict(b)
}

// Close releases the file's memory.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

// Parse reads a GGUF image held in buf. name is used in errors only.
func Parse(name string, buf []byte) (*File, error) {
	r := &cursor{file: name, buf: buf}
	magic, err := r.u32("magic")
	if err != nil {
		return nil, &Error{File: name, Msg: "not a GGUF file (too short)"}
	}
	if magic != Magic {
		return nil, &Error{File: name, Field: "magic", Msg: fmt.Sprintf("not a GGUF file (magic %#08x)", magic)}
	}
	f := &File{Path: name, kv: map[string]int{}, tensors: map[string]int{}}
	if f.Version, err = r.u32("version"); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		msg := fmt.Sprintf("unsupported version %d (want 2 or 3)", f.Version)
		if f.Version == 1 {
			msg = "version 1 is not supported; convert the file again with a current llama.cpp"
		} else if f.Version&0xffff == 0 {
			msg = fmt.Sprintf("version %#x: a big-endian file, which is not supported", f.Version)
		}
		return nil, &Error{File: name, Field: "version", Msg: msg}
	}
	nTensors, err := r.u64("tensor_count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("metadata_kv_count")
	if err != nil {
		return nil, err
	}
	// Each KV needs at least a key length and a type; each tensor info a
	// name length, dim count, one dim, a type and an offset.
	if nKV > uint64(r.remaining())/12 {
		return nil, &Error{File: name, Field: "metadata_kv_count", Msg: fmt.Sprintf("%d entries cannot fit in %d bytes", nKV, r.remaining())}
	}
	if nTensors > uint64(r.remaining())/32 {
		return nil, &Error{File: name, Field: "tensor_count", Msg: fmt.Sprintf("%d tensors cannot fit in %d bytes", nTensors, r.remaining())}
	}
	f.KVs = make([]KV, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str(fmt.Sprintf("metadata[%d].key", i))
		if err != nil {
			return nil, err
		}
		field := "metadata " + quoteKey(key)
		if _, dup := f.kv[key]; dup {
			return nil, &Error{File: name, Field: field, Msg: "duplicate key"}
		}
		vt, err := r.u32(field + ".type")
		if err != nil {
			return nil, err
		}
		v, err := r.value(field, ValueType(vt), 0)
		if err != nil {
			return nil, err
		}
		f.kv[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}
	f.Alignment = DefaultAlignment
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := toUint(v)
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, &Error{File: name, Field: "general.alignment", Msg: fmt.Sprintf("%v is not a power of two up to 1 MiB", v)}
		}
		f.Alignment = a
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		t, err := r.tensorInfo(i, f.Alignment)
		if err != nil {
			return nil, err
		}
		if _, dup := f.tensors[t.Name]; dup {
			return nil, &Error{File: name, Field: fmt.Sprintf("tensor %q", t.Name), Msg: "duplicate name"}
		}
		f.tensors[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	start := alignUp(uint64(r.off), f.Alignment)
	if len(f.Tensors) > 0 && start > uint64(len(buf)) {
		return nil, &Error{File: name, Field: "tensor data", Msg: "file ends before the data section"}
	}
	f.DataOffset = start
	if start < uint64(len(buf)) {
		f.data = buf[start:]
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > uint64(len(f.data)) || t.Size > uint64(len(f.data))-t.Offset {
			return nil, &Error{File: name, Field: fmt.Sprintf("tensor %q", t.Name),
				Msg: fmt.Sprintf("data [%d, +%d) runs past the end of the file (data section is %d bytes): truncated file?", t.Offset, t.Size, len(f.data))}
		}
	}
	return f, nil
}

func (r *cursor) tensorInfo(i uint64, alignment uint64) (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = r.str(fmt.Sprintf("tensor[%d].name", i)); err != nil {
		return t, err
	}
	field := fmt.Sprintf("tensor %q", t.Name)
	nd, err := r.u32(field + ".n_dims")
	if err != nil {
		return t, err
	}
	if nd == 0 || nd > MaxDims {
		return t, r.errf(field+".n_dims", "%d dimensions (want 1 to %d)", nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	total := uint64(1)
	for d := range t.Dims {
		if t.Dims[d], err = r.u64(field + ".dims"); err != nil {
			return t, err
		}
		if t.Dims[d] == 0 || t.Dims[d] > 1<<40 {
			return t, r.errf(field+".dims", "dimension %d is %d", d, t.Dims[d])
		}
		if total > math.MaxInt64/t.Dims[d] {
			return t, r.errf(field+".dims", "%v values overflow", t.Dims)
		}
		total *= t.Dims[d]
	}
	ty, err := r.u32(field + ".type")
	if err != nil {
		return t, err
	}
	t.Type = quant.Type(ty)
	if !t.Type.Known() {
		return t, r.errf(field+".type", "unsupported tensor type %v (ggml type %d); a Q4_K_M, Q5_K_M, Q6_K, Q8_0 or IQ4_XS file of the model will run", t.Type, ty)
	}
	rowBytes, err := t.Type.RowSize(int(t.Dims[0]))
	if err != nil {
		return t, r.errf(field+".dims", "%v", err)
	}
	t.Size = uint64(rowBytes) * (total / t.Dims[0])
	if t.Offset, err = r.u64(field + ".offset"); err != nil {
		return t, err
	}
	if t.Offset%alignment != 0 {
		return t, r.errf(field+".offset", "%d is not a multiple of the alignment %d", t.Offset, alignment)
	}
	return t, nil
}

// Get returns a metadata value by key.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.kv[key]
	if !ok {
		return nil, false
	}
	return f.KVs[i].Value, true
}

// Tensor returns a tensor's info by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the tensor's bytes, a slice of the mapping.
func (f *File) TensorData(t *TensorInfo) []byte {
	return f.data[t.Offset : t.Offset+t.Size : t.Offset+t.Size]
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

func quoteKey(k string) string { return fmt.Sprintf("%q", k) }

// cursor reads little-endian values from buf, checking every length first.
type cursor struct {
	file string
	buf  []byte
	off  int
}

func (r *cursor) remaining() int { return len(r.buf) - r.off }

func (r *cursor) errf(field, format string, args ...any) error {
	return &Error{File: r.file, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (r *cursor) need(field string, n int) error {
	if n < 0 || r.remaining() < n {
		return r.errf(field, "file ends at byte %d, %d bytes short: truncated file?", len(r.buf), n-r.remaining())
	}
	return nil
}

func (r *cursor) bytes(field string, n int) ([]byte, error) {
	if err := r.need(field, n); err != nil {
		return nil, err
	}
	b := r.buf[r.off : r.off+n]
	r.off += n
	return b, nil
}

func (r *cursor) u32(field string) (uint32, error) {
	b, err := r.bytes(field, 4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *cursor) u64(field string) (uint64, error) {
	b, err := r.bytes(field, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *cursor) str(field string) (string, error) {
	n, err := r.u64(field + ".length")
	if err != nil {
		return "", err
	}
	if n > uint64(r.remaining()) {
		return "", r.errf(field, "string of %d bytes runs past the end of the file", n)
	}
	b, _ := r.bytes(field, int(n))
	return string(b), nil
}

func (r *cursor) value(field string, t ValueType, depth int) (any, error) {
	if t != TypeArray && t != TypeString {
		if t.fixedSize() == 0 {
			return nil, r.errf(field, "unknown value type %d", uint32(t))
		}
		b, err := r.bytes(field, t.fixedSize())
		if err != nil {
			return nil, err
		}
		return scalar(t, b), nil
	}
	if t == TypeString {
		return r.str(field)
	}
	if depth >= maxArrayDepth {
		return nil, r.errf(field, "arrays nested deeper than %d", maxArrayDepth)
	}
	et, err := r.u32(field + ".array_type")
	if err != nil {
		return nil, err
	}
	n, err := r.u64(field + ".array_length")
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	minSize := uint64(elem.fixedSize())
	switch elem {
	case TypeString, TypeArray:
		minSize = 8 // a length, or a nested array's type + length would be 12
	}
	if minSize == 0 {
		return nil, r.errf(field, "unknown array element type %d", et)
	}
	if n > uint64(r.remaining())/minSize {
		return nil, r.errf(field, "array of %d %s elements cannot fit in the %d bytes left", n, elem, r.remaining())
	}
	return r.array(field, elem, int(n), depth)
}

func (r *cursor) array(field string, elem ValueType, n int, depth int) (Array, error) {
	a := Array{Type: elem}
	if sz := elem.fixedSize(); sz > 0 {
		b, err := r.bytes(field, n*sz)
		if err != nil {
			return a, err
		}
		a.Values = scalarSlice(elem, b, n)
		return a, nil
	}
	switch elem {
	case TypeString:
		s := make([]string, n)
		for i := range s {
			v, err := r.str(field)
			if err != nil {
				return a, err
			}
			s[i] = v
		}
		a.Values = s
	case TypeArray:
		s := make([]Array, n)
		for i := range s {
			v, err := r.value(field, TypeArray, depth+1)
			if err != nil {
				return a, err
			}
			s[i] = v.(Array)
		}
		a.Values = s
	}
	return a, nil
}

func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeBool:
		return b[0] != 0
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("unreachable")
}

func scalarSlice(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8(nil), b...)
	case TypeInt8:
		return decodeSlice(b, n, 1, func(b []byte) int8 { return int8(b[0]) })
	case TypeBool:
		return decodeSlice(b, n, 1, func(b []byte) bool { return b[0] != 0 })
	case TypeUint16:
		return decodeSlice(b, n, 2, le.Uint16)
	case TypeInt16:
		return decodeSlice(b, n, 2, func(b []byte) int16 { return int16(le.Uint16(b)) })
	case TypeUint32:
		return decodeSlice(b, n, 4, le.Uint32)
	case TypeInt32:
		return decodeSlice(b, n, 4, func(b []byte) int32 { return int32(le.Uint32(b)) })
	case TypeFloat32:
		return decodeSlice(b, n, 4, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) })
	case TypeUint64:
		return decodeSlice(b, n, 8, le.Uint64)
	case TypeInt64:
		return decodeSlice(b, n, 8, func(b []byte) int64 { return int64(le.Uint64(b)) })
	case TypeFloat64:
		return decodeSlice(b, n, 8, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) })
	}
	panic("unreachable")
}

// decodeSlice decodes n values of size bytes each.
func decodeSlice[T any](b []byte, n, size int, decode func([]byte) T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = decode(b[i*size:])
	}
	return s
}
