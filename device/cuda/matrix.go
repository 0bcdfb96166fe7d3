package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"dovetail/device"
	"dovetail/models"
	"dovetail/quant"
)

// cudaMat is a frozen matrix on the GPU: in its GGUF blocks (raw, for the
// formats of device.GPUKeepsBlocks), which quant.cu's kernels dequantize
// in registers, so its VRAM is its file bytes; else as float32 (buf),
// whose products go to cuBLAS like every other.
type cudaMat struct {
	rows, cols int
	typ        quant.Type
	rowBytes   int
	raw        uint64 // the blocks; 0 when buf holds the values
	buf        cudaBuf
}

func (m *cudaMat) Rows() int { return m.rows }
func (m *cudaMat) Cols() int { return m.cols }

// blockFormat is how quant.cu names a format's kernels.
type blockFormat struct {
	dequant   string // dequant_NAME
	mmv       string // the product: mmvq_NAME over 8-bit activations, mmv_NAME over floats
	glu, gluq string // gate and up with SwiGLU (8-bit formats): mmvq_glu_NAME, mmvq_gluq_NAME
	float     bool   // no sub-blocks (F16, BF16): the product reads float activations
}

// blockFormats are the formats device.GPUKeepsBlocks names.
var blockFormats = map[quant.Type]blockFormat{
	quant.Q4_0: q8Format("q4_0"), quant.Q8_0: q8Format("q8_0"), quant.Q4_K: q8Format("q4_k"),
	quant.Q5_K: q8Format("q5_k"), quant.Q6_K: q8Format("q6_k"), quant.IQ4_XS: q8Format("iq4_xs"),
	quant.F16: floatFormat("f16"), quant.BF16: floatFormat("bf16"),
}

// q8Format names the kernels of a format whose products read 8-bit
// activations.
func q8Format(name string) blockFormat {
	return blockFormat{dequant: "dequant_" + name, mmv: "mmvq_" + name, glu: "mmvq_glu_" + name,
		gluq: "mmvq_gluq_" + name}
}

// floatFormat names the kernels of a format without sub-blocks.
func floatFormat(name string) blockFormat {
	return blockFormat{dequant: "dequant_" + name, mmv: "mmv_" + name, float: true}
}

// quant.cu's launch shapes: a warp per weight row, mmvWarps rows a block,
// mmvCols activation rows a launch. Batches of up to mmvRows rows (decode,
// a tree's verification) take mmv launches, which read the weights once
// per mmvCols rows; larger ones (prefill) dequantize tiles for cuBLAS.
const (
	gluWarps = 8 // quant.cu's GLU_WARPS: a block of mmvq_gluq_ makes 32 rows
	mmvWarps = 4
	mmvCols  = 8
	mmvRows  = 64
	// tileBytes bounds a dequantized tile of rows.
	tileBytes = 16 << 20
)

func (d *cudaDev) UploadMatrix(t *models.Tensor) (device.Matrix, error) {
	if !quant.CanDequantize(t.Type) {
		return nil, fmt.Errorf("tensor %s: type %v cannot be dequantized", t.Name, t.Type)
	}
	if rb, err := t.Type.RowSize(t.Cols); err != nil || rb != t.RowBytes || len(t.Data) < t.Rows*t.RowBytes {
		return nil, fmt.Errorf("tensor %s: %d bytes for %d rows of %d %v values", t.Name, len(t.Data), t.Rows, t.Cols, t.Type)
	}
	if device.GPUKeepsBlocks(t.Type) {
		return d.uploadBlocks(t), nil
	}
	return d.uploadFloats(t)
}

// uploadBlocks copies t's blocks as they are.
func (d *cudaDev) uploadBlocks(t *models.Tensor) *cudaMat {
	bytes := t.Rows * t.RowBytes
	d.enter()
	defer d.leave()
	m := &cudaMat{rows: t.Rows, cols: t.Cols, typ: t.Type, rowBytes: t.RowBytes, raw: d.alloc(bytes)}
	d.upload(m.raw, unsafe.Pointer(unsafe.SliceData(t.Data)), bytes)
	// Other streams of the GPU read the matrix too (sameMemory): the copy
	// must have landed before anyone's kernel can.
	d.sync()
	runtime.KeepAlive(t.Data)
	return m
}

// uploadFloats dequantizes t into float32 on the GPU, a few megabytes at a
// time: the whole matrix as floats never sits in host memory.
func (d *cudaDev) uploadFloats(t *models.Tensor) (device.Matrix, error) {
	b := d.Alloc(t.Rows * t.Cols).(*cudaBuf)
	chunk := max(1, (4<<20)/max(1, t.Cols))
	tmp := make([]float32, min(chunk, t.Rows)*t.Cols)
	for lo := 0; lo < t.Rows; lo += chunk {
		hi := min(lo+chunk, t.Rows)
		for r := lo; r < hi; r++ {
			if err := quant.DequantizeRow(t.Type, tmp[(r-lo)*t.Cols:(r-lo+1)*t.Cols], t.Row(r)); err != nil {
				d.Free(b)
				return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
			}
		}
		d.Upload(d.View(b, lo*t.Cols, (hi-lo)*t.Cols), tmp[:(hi-lo)*t.Cols])
	}
	d.enter()
	d.sync()
	d.leave()
	return &cudaMat{rows: t.Rows, cols: t.Cols, typ: quant.F32, rowBytes: 4 * t.Cols, buf: *b}, nil
}

// UpdateMatrix puts t's values into m, made from a tensor of t's type
// and shape (device.UpdateMatrix): a draft's re-frozen Q8_0 copy.
func (d *cudaDev) UpdateMatrix(mm device.Matrix, t *models.Tensor) error {
	m := d.mat(mm)
	if m.raw == 0 || t.Type != m.typ || t.Rows != m.rows || t.RowBytes != m.rowBytes || len(t.Data) < t.Rows*t.RowBytes {
		return fmt.Errorf("tensor %s: %d×%d %v into a matrix of %d×%d %v", t.Name, t.Rows, t.Cols, t.Type, m.rows, m.cols, m.typ)
	}
	d.enter()
	defer d.leave()
	// Kernels queued before may still read the old values.
	d.sync()
	d.upload(m.raw, unsafe.Pointer(unsafe.SliceData(t.Data)), t.Rows*t.RowBytes)
	d.sync()
	runtime.KeepAlive(t.Data)
	return nil
}

// CopiesMatrices: the GPU holds its own copy (device.CopiesMatrices).
func (d *cudaDev) CopiesMatrices() bool { return true }

// DownloadMatrix copies m's blocks into dst (device.DownloadMatrix).
func (d *cudaDev) DownloadMatrix(mm device.Matrix, dst []byte) error {
	m := d.mat(mm)
	if m.raw == 0 || len(dst) < m.rows*m.rowBytes {
		return fmt.Errorf("download of a %d×%d %v matrix into %d bytes", m.rows, m.cols, m.typ, len(dst))
	}
	d.enter()
	defer d.leave()
	d.download(unsafe.Pointer(&dst[0]), m.raw, m.rows*m.rowBytes)
	runtime.KeepAlive(dst)
	return nil
}

// FreeMatrix gives m's memory back (device.FreeMatrix).
func (d *cudaDev) FreeMatrix(mm device.Matrix) {
	m := d.mat(mm)
	if m.raw == 0 {
		d.Free(&m.buf)
		return
	}
	d.enter()
	defer d.leave()
	d.sync()
	d.l.must("cuMemFree", d.l.call(d.l.memFree, uintptr(m.raw)))
	m.raw = 0
}

func (d *cudaDev) mat(m device.Matrix) *cudaMat {
	cm, ok := m.(*cudaMat)
	if !ok {
		panic(fmt.Sprintf("cuda: %T is not a matrix of a CUDA device", m))
	}
	return cm
}

// blockProduct: out[n×R] = x[n×K] · Wᵀ for W in its blocks; with add
// (a device address, else 0) add + that, add [n×R] (which may be out).
func (d *cudaDev) blockProduct(out, x uint64, m *cudaMat, n int, add uint64) {
	if n > mmvRows {
		beta := float32(0)
		if add != 0 {
			d.copyBytes(out, add, 4*n*m.rows)
			beta = 1
		}
		for r0 := 0; r0 < m.rows; r0 += d.tileRows(m) {
			nr := min(d.tileRows(m), m.rows-r0)
			tile := d.dequantTile(m, r0, nr)
			d.gemm(out+4*uint64(r0), x, tile, n, nr, m.cols, m.cols, m.cols, m.rows, false, true, beta)
		}
		return
	}
	f, K := blockFormats[m.typ], m.cols
	grid, block := [3]int{(m.rows + mmvWarps - 1) / mmvWarps}, [3]int{32, mmvWarps}
	addAt := func(c0 int) uint64 {
		if add == 0 {
			return 0
		}
		return add + 4*uint64(c0*m.rows)
	}
	if f.float {
		for c0 := 0; c0 < n; c0 += mmvCols {
			d.launch(f.mmv, grid, block, 0, out+4*uint64(c0*m.rows), m.raw, x+4*uint64(c0*K),
				i32(m.rows), i32(K), i32(min(mmvCols, n-c0)), i32(m.rows), addAt(c0))
		}
		return
	}
	xq, ds := d.quantized(x, n, K, out, m.rows)
	for c0 := 0; c0 < n; c0 += mmvCols {
		d.launch(f.mmv, grid, block, 0, out+4*uint64(c0*m.rows), m.raw, xq+uint64(c0*K), ds+8*uint64(c0*K/32),
			i32(m.rows), i32(K), i32(m.rowBytes), i32(min(mmvCols, n-c0)), i32(m.rows), addAt(c0))
	}
}

// product3: outs[i][n×Rᵢ] = x[n×K] · Wᵢᵀ for three matrices in their blocks
// of 8-bit formats, in one launch per mmvCols rows (mmvq3).
func (d *cudaDev) product3(outs [3]uint64, x uint64, ms [3]*cudaMat, n int) {
	K := ms[0].cols
	xq, ds := d.quantized(x, n, K, outs[0], ms[0].rows)
	blocks := 0
	for i, m := range ms {
		blocks += (m.rows + mmvWarps - 1) / mmvWarps
		if i > 0 && overlaps(outs[i], n*m.rows, x, n*K) {
			d.q8 = q8Memo{}
		}
	}
	for c0 := 0; c0 < n; c0 += mmvCols {
		args := []any{xq + uint64(c0*K), ds + 8*uint64(c0*K/32), i32(K), i32(min(mmvCols, n-c0))}
		for i, m := range ms {
			args = append(args, outs[i]+4*uint64(c0*m.rows), m.raw, i32(m.typ), i32(m.rows), i32(m.rowBytes))
		}
		d.launch("mmvq3", [3]int{blocks}, [3]int{32, mmvWarps}, 0, args...)
	}
}

// overlaps reports whether a floats at a and b floats at b share memory.
func overlaps(a uint64, na int, b uint64, nb int) bool {
	return a < b+4*uint64(nb) && b < a+4*uint64(na)
}

// gluProduct: out[n×R] = SiLU(x·Gᵀ) ⊙ (x·Uᵀ) for G and U in their blocks
// of one 8-bit format, n ≤ mmvRows. Where R is whole 32s the launch also
// leaves out's 8-bit codes, for the down product that reads it next (in
// scratch slot 5: the codes of x it reads are in 3).
func (d *cudaDev) gluProduct(out, x uint64, g, u *cudaMat, n int) {
	K, R, f := g.cols, g.rows, blockFormats[g.typ]
	xq, ds := d.quantized(x, n, K, out, R)
	if R%32 != 0 {
		grid, block := [3]int{(R + mmvWarps - 1) / mmvWarps}, [3]int{32, mmvWarps}
		for c0 := 0; c0 < n; c0 += mmvCols {
			d.launch(f.glu, grid, block, 0, out+4*uint64(c0*R), g.raw, u.raw,
				xq+uint64(c0*K), ds+8*uint64(c0*K/32), i32(R), i32(K), i32(g.rowBytes), i32(min(mmvCols, n-c0)), i32(R))
		}
		return
	}
	oq := d.scratchBytes(5, n*R+8*(n*R/32))
	ods := ds0(oq, n, R)
	for c0 := 0; c0 < n; c0 += mmvCols {
		d.launch(f.gluq, [3]int{R / 32}, [3]int{32, gluWarps}, 0, out+4*uint64(c0*R),
			oq+uint64(c0*R), ods+8*uint64(c0*R/32), g.raw, u.raw, xq+uint64(c0*K), ds+8*uint64(c0*K/32),
			i32(K), i32(g.rowBytes), i32(min(mmvCols, n-c0)), i32(R))
	}
	d.q8 = q8Memo{x: out, n: n, k: R, ops: d.ops, codes: oq}
}

// quantized is x [n×K] in 8-bit codes and (scale, scale·Σ codes) per 32
// values, in scratch slot 3: made once for the products that read the
// same x in a row (a layer's Q, K and V; its gate and up), or by the
// RMSNorm that made x (rmsnormQ8). The memo ends where this product's
// output [n×R] at out overlaps x.
func (d *cudaDev) quantized(x uint64, n, K int, out uint64, R int) (xq, ds uint64) {
	subs := n * K / 32
	if d.q8.holds(x, n, K, d.ops) {
		xq = d.q8.codes
	} else {
		xq = d.scratchBytes(3, n*K+8*subs)
		d.elems("quantize_q8", n*K, xq, ds0(xq, n, K), x, subs)
	}
	d.q8 = q8Memo{x: x, n: n, k: K, ops: d.ops, codes: xq}
	if overlaps(out, n*R, x, n*K) {
		d.q8 = q8Memo{} // this product writes over x
	}
	return xq, ds0(xq, n, K)
}

// q8Memo is the float32 activations whose 8-bit form scratch holds (at
// codes): x [n×k], quantized by operation ops or kept valid through it. It
// holds them for the next operation only if that is the next one entered:
// any other operation may have written x.
type q8Memo struct {
	x     uint64
	n, k  int
	ops   int
	codes uint64 // where they are: scratch slot 3, or 5 (a GLU's output)
}

func (q q8Memo) holds(x uint64, n, k, ops int) bool {
	return q.x != 0 && q.x == x && q.n == n && q.k == k && q.ops == ops-1
}

// ds0 is where the scales of n×k activations follow their codes at xq.
func ds0(xq uint64, n, k int) uint64 { return xq + uint64(n*k) }

// blockProductBackward: dx[n×K] += dout[n×R] · W, a tile of W's rows at a
// time.
func (d *cudaDev) blockProductBackward(dx, dout uint64, m *cudaMat, n int) {
	for r0 := 0; r0 < m.rows; r0 += d.tileRows(m) {
		nr := min(d.tileRows(m), m.rows-r0)
		tile := d.dequantTile(m, r0, nr)
		d.gemm(dx, dout+4*uint64(r0), tile, n, m.cols, nr, m.rows, m.cols, m.cols, false, false, 1)
	}
}

func (d *cudaDev) tileRows(m *cudaMat) int { return max(1, tileBytes/(4*m.cols)) }

// dequantTile is rows [r0, r0+nr) of W as float32 in scratch.
func (d *cudaDev) dequantTile(m *cudaMat, r0, nr int) uint64 {
	tile := d.scratchBytes(4, 4*nr*m.cols)
	d.dequantRows(tile, m, 0, r0, nr)
	return tile
}

// dequantRows writes n rows of W as float32 to out: rows rowIdx[i] (a
// device array of int32), or r0+i when rowIdx is 0.
func (d *cudaDev) dequantRows(out uint64, m *cudaMat, rowIdx uint64, r0, n int) {
	f := blockFormats[m.typ]
	threads := n * m.cols
	if !f.float {
		threads /= 32 // a thread per 32 values
	}
	d.elems(f.dequant, threads, out, m.raw, rowIdx, i32(r0), i32(n), i32(m.cols), i32(m.rowBytes))
}
