package device

import (
	"testing"

	"dovetail/models"
	"dovetail/quant"
)

// A GPU Counter counts a matrix in its blocks at its file bytes, other
// formats as float32, and a draft's Q8_0 copy once: as the matrix
// uploaded, not again as the host's Hold.
func TestCounterCountsAsTheGPUHolds(t *testing.T) {
	const rows, cols = 10, 256
	q4k := &models.Tensor{Name: "w", Type: quant.Q4_K, Rows: rows, Cols: cols, RowBytes: 144}
	q2k := &models.Tensor{Name: "w", Type: quant.Q2_K, Rows: rows, Cols: cols, RowBytes: 84}
	gpu := NewCounter(true)
	if _, err := gpu.UploadMatrix(q4k); err != nil {
		t.Fatal(err)
	}
	if got := gpu.Held(); got != rows*144 {
		t.Errorf("a Q4_K matrix on a GPU: %d bytes, want its file's %d", got, rows*144)
	}
	if _, err := gpu.UploadMatrix(q2k); err != nil {
		t.Fatal(err)
	}
	if got := gpu.Held(); got != rows*144+4*rows*cols {
		t.Errorf("and a Q2_K one (float32 there): %d bytes, want %d", got, rows*144+4*rows*cols)
	}
	Hold(gpu, 1000)
	if got := gpu.Held(); got != rows*144+4*rows*cols {
		t.Errorf("Hold on a GPU counter counted %d bytes more", got-(rows*144+4*rows*cols))
	}
	if KeepsFloat32(gpu, 16) {
		t.Error("a GPU counter keeps small matrices as float32")
	}
	host := NewCounter(false)
	Hold(host, 1000)
	if host.Held() != 1000 {
		t.Errorf("Hold on a host counter: %d bytes, want 1000", host.Held())
	}
}
