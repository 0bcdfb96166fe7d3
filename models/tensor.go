package models

import (
	"fmt"

	"dovetail/models/gguf"
	"dovetail/quant"
)

// Tensor is a weight matrix in its stored format. Data is a slice of the
// memory-mapped file: weights are never copied or converted at load.
type Tensor struct {
	Name     string
	Type     quant.Type
	Cols     int // values per row (the input size of a matrix-vector product)
	Rows     int
	RowBytes int
	Data     []byte
}

// Row returns the bytes of row i.
func (t *Tensor) Row(i int) []byte { return t.Data[i*t.RowBytes : (i+1)*t.RowBytes] }

// binder looks tensors up by name and checks their shapes, collecting the
// first error so that weight binding reads as a list.
type binder struct {
	f   *gguf.File
	err error
}

// matrix binds a 2-D tensor of rows × cols (ggml dims [cols, rows]).
func (b *binder) matrix(name string, cols, rows int) *Tensor {
	if b.err != nil {
		return nil
	}
	ti, ok := b.f.Tensor(name)
	if !ok {
		b.err = fmt.Errorf("%s: tensor %s missing", b.f.Path, name)
		return nil
	}
	d := ti.Dims
	if len(d) > 2 || int(d[0]) != cols || (len(d) == 2 && int(d[1]) != rows) || (len(d) == 1 && rows != 1) {
		b.err = fmt.Errorf("%s: tensor %s has shape %v, want [%d %d]", b.f.Path, name, d, cols, rows)
		return nil
	}
	return &Tensor{Name: name, Type: ti.Type, Cols: cols, Rows: rows, RowBytes: ti.RowBytes(), Data: b.f.TensorData(ti)}
}

// vector binds a 1-D tensor of n values and converts it to float32; norms
// and biases are small, and every kernel wants them as float32.
func (b *binder) vector(name string, n int) []float32 {
	t := b.matrix(name, n, 1)
	if t == nil {
		return nil
	}
	v := make([]float32, n)
	if err := quant.DequantizeRow(t.Type, v, t.Data); err != nil {
		b.err = fmt.Errorf("%s: tensor %s: %w", b.f.Path, name, err)
		return nil
	}
	return v
}

func (b *binder) has(name string) bool { _, ok := b.f.Tensor(name); return ok }
