package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"dovetail/internal/atomicfile"
)

// Write writes tensors, in the order given, and meta as a safetensors file,
// atomically. Each tensor's Data must hold exactly its shape of its dtype.
func Write(path string, tensors []*Tensor, meta map[string]string) error {
	header, err := encodeHeader(tensors, meta)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		for _, t := range tensors {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		}
		return nil
	})
}

// encodeHeader lays the tensors out back to back and pads the JSON with
// spaces to a multiple of 8 bytes, as the reference writer does, so that
// the data section is aligned.
func encodeHeader(tensors []*Tensor, meta map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	if len(meta) > 0 {
		m, _ := json.Marshal(meta)
		buf.WriteString(`"__metadata__":`)
		buf.Write(m)
	}
	seen := map[string]bool{}
	var off uint64
	for i, t := range tensors {
		size, ok := dtypeSize[t.DType]
		if !ok {
			return nil, fmt.Errorf("tensor %q: unsupported dtype %q", t.Name, t.DType)
		}
		if seen[t.Name] || t.Name == "__metadata__" {
			return nil, fmt.Errorf("tensor %q: named twice", t.Name)
		}
		seen[t.Name] = true
		if t.Count()*size != len(t.Data) || t.Count() < 0 {
			return nil, fmt.Errorf("tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		name, _ := json.Marshal(t.Name)
		e, _ := json.Marshal(entry{DType: t.DType, Shape: shape, Offsets: []uint64{off, off + uint64(len(t.Data))}})
		if i > 0 || len(meta) > 0 {
			buf.WriteByte(',')
		}
		buf.Write(name)
		buf.WriteByte(':')
		buf.Write(e)
		off += uint64(len(t.Data))
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	return buf.Bytes(), nil
}
