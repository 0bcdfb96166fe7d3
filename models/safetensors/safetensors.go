// Package safetensors reads Hugging Face safetensors files: a little-endian
// uint64 header length, a JSON header naming each tensor's dtype, shape and
// byte range, then the raw data. Files are memory-mapped and validated
// whole before any tensor is handed out; Write makes them (atomically).
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	"dovetail/internal/mapfile"
)

// Tensor is one entry of the header and its bytes.
type Tensor struct {
	Name  string
	DType string // F32, F16, BF16, I64, I32, BOOL
	Shape []int  // row-major, outermost first
	Data  []byte
	File  string // the file it was read from (errors name it)
}

// Count is the number of values its shape holds.
func (t *Tensor) Count() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed safetensors image.
type File struct {
	Path     string
	Metadata map[string]string
	Tensors  map[string]*Tensor
	unmap    func() error
}

// dtypeSize holds the dtypes Dovetail reads: the float formats of weights,
// and the integers and booleans of EAGLE-3's vocabulary maps.
var dtypeSize = map[string]int{"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "BOOL": 1}

// maxHeader bounds the JSON header, as the reference implementation does.
const maxHeader = 100 << 20

// Open memory-maps path and parses it. Close releases the mapping; the
// tensors' Data are invalid after it.
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
	return f, nil
}

// Close releases the file's memory.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.Tensors = nil, nil
	return err
}

// entry is a tensor's line in the header.
type entry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets []uint64 `json:"data_offsets"`
}

// Parse validates buf and slices its tensors out of it. name is used in
// errors only.
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
		return nil, fail("header", "not a safetensors header: %v", err)
	}
	data := buf[8+n:]
	f := &File{Path: name, Tensors: map[string]*Tensor{}}
	offsets := map[string][2]uint64{}
	for k, v := range raw {
		if k == "__metadata__" {
			if err := json.Unmarshal(v, &f.Metadata); err != nil {
				return nil, fail("__metadata__", "%v", err)
			}
			continue
		}
		t, off, err := parseEntry(k, v, data)
		if err != nil {
			return nil, fail(fmt.Sprintf("tensor %q", k), "%s", err)
		}
		t.File = name
		f.Tensors[k], offsets[k] = t, off
	}
	if a, b, ok := overlap(offsets); ok {
		return nil, fail(fmt.Sprintf("tensor %q", b), "data_offsets %v overlap tensor %q's %v", offsets[b], a, offsets[a])
	}
	return f, nil
}

// parseEntry checks one header entry against the data section.
func parseEntry(name string, v json.RawMessage, data []byte) (*Tensor, [2]uint64, error) {
	var e entry
	if err := json.Unmarshal(v, &e); err != nil {
		return nil, [2]uint64{}, err
	}
	size, ok := dtypeSize[e.DType]
	if !ok {
		return nil, [2]uint64{}, fmt.Errorf("unsupported dtype %q (Dovetail reads F32, F16, BF16, I64, I32, BOOL)", e.DType)
	}
	count := uint64(1)
	for _, d := range e.Shape {
		if d < 0 || (d > 0 && count > (1<<40)/uint64(d)) {
			return nil, [2]uint64{}, fmt.Errorf("bad shape %v", e.Shape)
		}
		count *= uint64(d)
	}
	if len(e.Offsets) != 2 || e.Offsets[0] > e.Offsets[1] || e.Offsets[1] > uint64(len(data)) {
		return nil, [2]uint64{}, fmt.Errorf("data_offsets %v outside the %d-byte data section", e.Offsets, len(data))
	}
	if e.Offsets[1]-e.Offsets[0] != count*uint64(size) {
		return nil, [2]uint64{}, fmt.Errorf("%d bytes for shape %v of %s (want %d)", e.Offsets[1]-e.Offsets[0], e.Shape, e.DType, count*uint64(size))
	}
	t := &Tensor{Name: name, DType: e.DType, Shape: e.Shape, Data: data[e.Offsets[0]:e.Offsets[1]:e.Offsets[1]]}
	return t, [2]uint64{e.Offsets[0], e.Offsets[1]}, nil
}

// overlap finds two tensors whose byte ranges share a byte (empty tensors
// share none), naming them in a fixed order.
func overlap(offsets map[string][2]uint64) (string, string, bool) {
	names := make([]string, 0, len(offsets))
	for k, o := range offsets {
		if o[1] > o[0] {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := offsets[names[i]], offsets[names[j]]
		return a[0] < b[0] || (a[0] == b[0] && names[i] < names[j])
	})
	for i := 1; i < len(names); i++ {
		if offsets[names[i]][0] < offsets[names[i-1]][1] {
			return names[i-1], names[i], true
		}
	}
	return "", "", false
}

// Names lists the tensors in name order.
func (f *File) Names() []string { return sortedNames(f.Tensors) }

func sortedNames(m map[string]*Tensor) []string {
	s := make([]string, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
