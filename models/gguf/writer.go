package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"dovetail/internal/atomicfile"
	"dovetail/quant"
)

// Writer builds a GGUF version 3 file in memory order: metadata first, then
// tensor infos, then the aligned data. Tensor bytes are held by reference
// until WriteTo.
type Writer struct {
	KVs       []KV
	tensors   []TensorInfo
	data      [][]byte
	alignment uint64
	offset    uint64
}

// NewWriter returns an empty writer with the default alignment.
func NewWriter() *Writer { return &Writer{alignment: DefaultAlignment} }

// Set adds or replaces a metadata entry. Values are the Go types listed at
// KV; int and []int are stored as int32 / int32 arrays, []float64 as float64.
func (w *Writer) Set(key string, value any) {
	switch v := value.(type) {
	case int:
		value = int32(v)
	case []int:
		s := make([]int32, len(v))
		for i := range v {
			s[i] = int32(v[i])
		}
		value = Array{Type: TypeInt32, Values: s}
	case []string:
		value = Array{Type: TypeString, Values: v}
	case []float32:
		value = Array{Type: TypeFloat32, Values: v}
	case []int32:
		value = Array{Type: TypeInt32, Values: v}
	}
	if key == "general.alignment" {
		if a, ok := toUint(value); ok {
			w.alignment = a
		}
	}
	for i := range w.KVs {
		if w.KVs[i].Key == key {
			w.KVs[i].Value = value
			return
		}
	}
	w.KVs = append(w.KVs, KV{Key: key, Value: value})
}

// AddTensor appends a tensor. dims are ggml order (row length first).
func (w *Writer) AddTensor(name string, t quant.Type, dims []uint64, data []byte) error {
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("tensor %q: %d dims", name, len(dims))
	}
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	row, err := t.RowSize(int(dims[0]))
	if err != nil {
		return fmt.Errorf("tensor %q: %w", name, err)
	}
	if want := uint64(row) * (n / dims[0]); uint64(len(data)) != want {
		return fmt.Errorf("tensor %q: %d bytes of data, want %d", name, len(data), want)
	}
	for _, x := range w.tensors {
		if x.Name == name {
			return fmt.Errorf("tensor %q added twice", name)
		}
	}
	w.offset = alignUp(w.offset, w.alignment)
	w.tensors = append(w.tensors, TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: t, Offset: w.offset, Size: uint64(len(data))})
	w.data = append(w.data, data)
	w.offset += uint64(len(data))
	return nil
}

// WriteTo writes the whole file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	bw := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	le := binary.LittleEndian
	put := func(v any) { binary.Write(bw, le, v) }
	put(uint32(Magic))
	put(uint32(3))
	put(uint64(len(w.tensors)))
	put(uint64(len(w.KVs)))
	for _, kv := range w.KVs {
		writeString(bw, kv.Key)
		if err := writeValue(bw, kv.Value, true); err != nil {
			return bw.n, fmt.Errorf("metadata %q: %w", kv.Key, err)
		}
	}
	for _, t := range w.tensors {
		writeString(bw, t.Name)
		put(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			put(d)
		}
		put(uint32(t.Type))
		put(t.Offset)
	}
	pad := func(to uint64) {
		for uint64(bw.n) < to {
			bw.Write([]byte{0})
		}
	}
	start := alignUp(uint64(bw.n), w.alignment)
	pad(start)
	for i, t := range w.tensors {
		pad(start + t.Offset)
		bw.Write(w.data[i])
	}
	if bw.err != nil {
		return bw.n, bw.err
	}
	return bw.n, bw.w.(*bufio.Writer).Flush()
}

// WriteFile writes the file atomically: a crash never leaves a
// half-written model where a good one was.
func (w *Writer) WriteFile(path string) error {
	return atomicfile.Write(path, func(f io.Writer) error {
		_, err := w.WriteTo(f)
		return err
	})
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func writeString(w io.Writer, s string) {
	binary.Write(w, binary.LittleEndian, uint64(len(s)))
	io.WriteString(w, s)
}

func valueType(v any) (ValueType, bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case Array:
		return TypeArray, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	}
	return 0, false
}

func writeValue(w io.Writer, v any, tagged bool) error {
	le := binary.LittleEndian
	vt, ok := valueType(v)
	if !ok {
		return fmt.Errorf("unsupported value type %T", v)
	}
	if tagged {
		binary.Write(w, le, uint32(vt))
	}
	switch x := v.(type) {
	case string:
		writeString(w, x)
	case bool:
		b := uint8(0)
		if x {
			b = 1
		}
		w.Write([]byte{b})
	case float32:
		binary.Write(w, le, math.Float32bits(x))
	case float64:
		binary.Write(w, le, math.Float64bits(x))
	case Array:
		binary.Write(w, le, uint32(x.Type))
		binary.Write(w, le, uint64(x.Len()))
		switch s := x.Values.(type) {
		case []string:
			for _, e := range s {
				writeString(w, e)
			}
		case []bool:
			for _, e := range s {
				writeValue(w, e, false)
			}
		case []Array:
			for _, e := range s {
				if err := writeValue(w, e, false); err != nil {
					return err
				}
			}
		case nil:
		default:
			// Fixed-size numeric slices encode as binary.Write lays them out.
			if err := binary.Write(w, le, s); err != nil {
				return err
			}
		}
	default:
		return binary.Write(w, le, x)
	}
	return nil
}
