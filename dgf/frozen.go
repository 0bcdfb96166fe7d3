package dgf

import (
	"errors"
	"fmt"
	"slices"

	"dovetail/device"
	"dovetail/models"
	"dovetail/quant"
)

// FreezeForDrafting gives each large matrix of a draft that will not train
// (a live version, a static draft) a Q8_0 copy that drafting multiplies
// with: drafting reads every weight once per tree level, and float32
// weights of a 7B-sized draft block are 800 MB; Q8_0 reads 3.8 times
// fewer bytes, with activations quantized as the target's are. Call it
// again after the weights change. Training and evaluation passes, which
// keep their own keys and values, read W.
func (d *Draft) FreezeForDrafting() error {
	return d.FreezeForDraftingUnless(nil)
}

// FreezeForDraftingUnless is FreezeForDrafting, giving up with ErrStopped
// before a matrix once stopped (nil: never) says so.
func (d *Draft) FreezeForDraftingUnless(stopped func() bool) error {
	var vals []float32
	for _, p := range d.Params {
		if stopped != nil && stopped() {
			return ErrStopped
		}
		if !d.quantizes(p) {
			d.dropQ(p)
			continue
		}
		if p.W == nil {
			continue // DropFloat: the Q8_0 copy is all there is
		}
		vals = d.Values(vals, p)
		if err := d.freeze(p, vals); err != nil {
			return err
		}
	}
	return nil
}

// DropFloat frees the float32 values of the matrices drafting reads in
// Q8_0 (call FreezeForDrafting first): a draft that only drafts never
// reads them, and they are most of its memory. What copies or saves the
// draft afterwards reads the Q8_0 values.
func (d *Draft) DropFloat() {
	for _, p := range d.Params {
		if p.Q != nil && p.W != nil {
			d.Dev.Free(p.W)
			p.W = nil
		}
	}
}

// quantizes reports whether FreezeForDrafting gives p a Q8_0 copy: not
// where the device would hold the copy as float32 anyway (the host, for
// small matrices), which would only round the weights and gain nothing.
func (d *Draft) quantizes(p *Param) bool {
	if p.Rows == 1 || device.KeepsFloat32(d.Dev, p.Size()) {
		return false
	}
	_, err := quant.Q8_0.RowSize(p.Cols) // a row that is not whole blocks stays float32
	return err == nil
}

// Values is p's values in buf (grown as needed): W's, or its Q8_0 copy's
// once W is dropped (read back from a GPU, which keeps the only copy).
func (d *Draft) Values(buf []float32, p *Param) []float32 {
	if device.Counting(d.Dev) {
		return buf // a counting device holds no values
	}
	buf = slices.Grow(buf[:0], p.Size())[:p.Size()]
	if p.W != nil {
		d.Dev.Download(buf, p.W)
		return buf
	}
	rows := p.qt.Data
	if rows == nil {
		rows = make([]byte, p.Rows*p.qt.RowBytes)
		if ok, err := device.DownloadMatrix(d.Dev, p.Q, rows); !ok || err != nil {
			panic(&device.Error{Err: fmt.Errorf("draft %s: its Q8_0 copy cannot be read back: %v", p.Name, err)})
		}
	}
	for r := range p.Rows {
		// The row size was checked when the copy was made.
		_ = quant.DequantizeRow(quant.Q8_0, buf[r*p.Cols:(r+1)*p.Cols], rows[r*p.qt.RowBytes:(r+1)*p.qt.RowBytes])
	}
	return buf
}

// freeze sets p's Q8_0 copy to vals, reusing the copy's memory.
func (d *Draft) freeze(p *Param, vals []float32) error {
	return d.freezeRows(p, func(r int) ([]float32, error) { return vals[r*p.Cols : (r+1)*p.Cols], nil })
}

// freezeRows sets p's Q8_0 copy to the rows row(0), row(1), ... in turn,
// reusing the copy's memory; an error of row's ends it, the copy dropped.
// A device that copies matrices (a GPU) keeps the only copy: the bytes it
// is made in are let go once it is there.
func (d *Draft) freezeRows(p *Param, row func(r int) ([]float32, error)) error {
	rb, _ := quant.Q8_0.RowSize(p.Cols)
	copies := device.CopiesMatrices(d.Dev)
	t := p.qt
	if t == nil {
		t = &models.Tensor{Name: p.Name, Type: quant.Q8_0, Rows: p.Rows, Cols: p.Cols, RowBytes: rb}
		if !copies {
			device.Hold(d.Dev, p.Rows*rb) // the Q8_0 copy is the host's, read in place
		}
		p.qt = t
	}
	if t.Data == nil && !device.Counting(d.Dev) {
		if copies {
			// The device keeps its own copy: the bytes serve each
			// matrix in turn, at every publication.
			d.qbuf = slices.Grow(d.qbuf[:0], p.Rows*rb)
			t.Data = d.qbuf[:p.Rows*rb]
		} else {
			t.Data = make([]byte, p.Rows*rb)
		}
	}
	if copies {
		defer func() { t.Data = nil }()
	}
	if t.Data != nil {
		for r := range p.Rows {
			v, err := row(r)
			if err == nil {
				err = quant.QuantizeRow(quant.Q8_0, t.Row(r), v)
			}
			if err != nil {
				d.dropQ(p)
				if errors.Is(err, ErrStopped) {
					return err
				}
				return fmt.Errorf("draft %s: %w", p.Name, err)
			}
		}
	}
	if p.Q != nil { // a GPU's copy takes the new values in place
		if ok, err := device.UpdateMatrix(d.Dev, p.Q, t); ok {
			if err != nil {
				d.dropQ(p)
				return fmt.Errorf("draft %s: %w", p.Name, err)
			}
			return nil
		}
	}
	q, err := d.Dev.UploadMatrix(t)
	if err != nil {
		d.dropQ(p)
		return fmt.Errorf("draft %s: %w", p.Name, err)
	}
	p.Q = q
	return nil
}

// dropQ forgets p's Q8_0 copy.
func (d *Draft) dropQ(p *Param) {
	if p.qt != nil && !device.CopiesMatrices(d.Dev) {
		device.Hold(d.Dev, -p.Rows*p.qt.RowBytes)
	}
	device.FreeMatrix(d.Dev, p.Q)
	p.Q, p.qt = nil, nil
}
