// Package safetensors reads Hugging Face safetensors files: a little-endian
// uint64 header length, a JSON header naming each tensor's dtype, shape and
// byte range, then the raw data. The data is memory-mapped by the caller or
// read whole; this package only validates and slices.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// Tensor is one entry of the header.
type Tensor struct {
	Name  string
	DType string // F32, F16, BF16, ...
	Shape []int  // row-major, outermost first
	Data  []byte
}

// File is a parsed safetensors image.
type File struct {
	Path     string
	Metadata map[string]string
	Tensors  map[string]*Tensor
}

var dtypeSize = map[string]int{"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}

// maxHeader bounds the JSON header, as the reference implementation does.
const maxHeader = 100 << 20

// Read reads and parses path.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse validates buf and slices its tensors out of it.
func Parse(name string, buf []byte) (*File, error) {
	fail := func(field, format string, a ...any) error {
		return fmt.Errorf("%s: %s: %s", name, field, fmt.Sprintf(format, a...))
	}
	if len(buf) < 8 {
		return nil, fail("header length", "file is %d bytes: truncated", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > maxHeader || n > uint64(len(buf)-8) {
		return nil, fail("header length", "%d bytes does not fit in a %d-byte file", n, len(buf))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf[8:8+n], &raw); err != nil {
		return nil, fail("header", "%v", err)
	}
	data := buf[8+n:]
	f := &File{Path: name, Tensors: map[string]*Tensor{}}
	for k, v := range raw {
		if k == "__metadata__" {
			if err := json.Unmarshal(v, &f.Metadata); err != nil {
				return nil, fail("__metadata__", "%v", err)
			}
			continue
		}
		var e struct {
			DType   string   `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fail(fmt.Sprintf("tensor %q", k), "%v", err)
		}
		size, ok := dtypeSize[e.DType]
		if !ok {
			return nil, fail(fmt.Sprintf("tensor %q", k), "unsupported dtype %q", e.DType)
		}
		count := uint64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > (1<<62)/uint64(d)) {
				return nil, fail(fmt.Sprintf("tensor %q", k), "bad shape %v", e.Shape)
			}
			count *= uint64(d)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] > e.Offsets[1] || e.Offsets[1] > uint64(len(data)) {
			return nil, fail(fmt.Sprintf("tensor %q", k), "data_offsets %v outside the %d-byte data section", e.Offsets, len(data))
		}
		if e.Offsets[1]-e.Offsets[0] != count*uint64(size) {
			return nil, fail(fmt.Sprintf("tensor %q", k), "%d bytes for shape %v of %s", e.Offsets[1]-e.Offsets[0], e.Shape, e.DType)
		}
		f.Tensors[k] = &Tensor{Name: k, DType: e.DType, Shape: e.Shape, Data: data[e.Offsets[0]:e.Offsets[1]]}
	}
	return f, nil
}

// Names lists the tensors in name order.
func (f *File) Names() []string {
	s := make([]string, 0, len(f.Tensors))
	for k := range f.Tensors {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
