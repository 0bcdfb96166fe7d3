package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"dovetail/device"
	"dovetail/quant"
)

// A target's KV cache on the GPU holds halves (device.AllocKV): a 7B's
// cache at 4096 positions is 2 GiB so, 4 GiB in float32, the difference
// between all its layers fitting an 8 GiB card or not. Keys and values
// are made in float32 and rounded once as they are stored (StoreKV);
// attention_h reads them.

// AllocKV allocates n halves.
func (d *cudaDev) AllocKV(n int) device.Buffer {
	d.enter()
	defer d.leave()
	words := (n + 1) / 2
	p := d.alloc(4 * words)
	d.l.must("cuMemsetD32Async", d.l.call(d.l.memsetD32, uintptr(p), 0, uintptr(words), d.stream))
	return &cudaBuf{p: p, n: n, half: true}
}

// StoreKV rounds src's float32 values into dst's halves.
func (d *cudaDev) StoreKV(dst, src device.Buffer) {
	db, sb := d.b(dst), d.f32("StoreKV", src)
	if !db.half || db.n != sb.n {
		panic(fmt.Sprintf("cuda: StoreKV of %d values into %d (half %v)", sb.n, db.n, db.half))
	}
	d.enter()
	defer d.leave()
	d.elems("store_half", sb.n, db.p, sb.p, sb.n)
}

// StoreKVPair is StoreKV of keys and values in one launch
// (device.StoreKVPair); caches in float32 take copies.
func (d *cudaDev) StoreKVPair(dk, k, dv, v device.Buffer) {
	kb, vb := d.f32("StoreKVPair", k), d.f32("StoreKVPair", v)
	dkb, dvb := d.b(dk), d.b(dv)
	if !dkb.half || !dvb.half {
		d.Copy(dk, k)
		d.Copy(dv, v)
		return
	}
	if dkb.n != kb.n || dvb.n != vb.n || kb.n != vb.n {
		panic(fmt.Sprintf("cuda: StoreKVPair of %d and %d values into %d and %d", kb.n, vb.n, dkb.n, dvb.n))
	}
	d.enter()
	defer d.leave()
	// The caches and the offsets into them, not the slots' addresses:
	// a step's graph then keeps this launch's arguments (graph.go).
	rk, offK := dkb.at()
	rv, offV := dvb.at()
	if offK > math.MaxInt32 || offV > math.MaxInt32 {
		panic(fmt.Sprintf("cuda: StoreKVPair at offsets %d and %d", offK, offV))
	}
	offs := hostArgs(d, []int32{int32(offK), int32(offV)})
	d.elems("store_half2", 2*kb.n, rk, kb.p, rv, vb.p, kb.n, offs)
}

// downloadHalf reads a cache's halves as float32 (tests look at them).
func (d *cudaDev) downloadHalf(dst []float32, b *cudaBuf) {
	if len(dst) > b.n {
		panic(fmt.Sprintf("cuda: download of %d values from a buffer of %d", len(dst), b.n))
	}
	if len(dst) == 0 {
		return
	}
	h := make([]uint16, len(dst))
	d.enter()
	d.download(unsafe.Pointer(&h[0]), b.p, 2*len(h))
	d.leave()
	for i, v := range h {
		dst[i] = quant.F16ToF32(v)
	}
}

// f32 is x, which op needs in float32.
func (d *cudaDev) f32(op string, x device.Buffer) *cudaBuf {
	b := d.b(x)
	if b.half {
		panic(fmt.Sprintf("cuda: %s of a KV cache of halves", op))
	}
	return b
}
