package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// Hand-built blocks: bytes laid out from ggml-common.h's structs, expected
// values derived from the format descriptions independently of the decoder.

// f16 bit patterns used below.
const (
	h1     = 0x3c00 // 1
	hm1    = 0xbc00 // -1
	h2     = 0x4000 // 2
	hm2    = 0xc000 // -2
	hHalf  = 0x3800 // 0.5
	hQuart = 0x3400 // 0.25
	hEigth = 0x3000 // 0.125
)

func le16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

func dequant(t *testing.T, typ Type, src []byte, n int) []float32 {
	t.Helper()
	dst := make([]float32, n)
	if err := DequantizeRow(typ, dst, src); err != nil {
		t.Fatalf("DequantizeRow(%v): %v", typ, err)
	}
	return dst
}

func expectValues(t *testing.T, typ Type, got []float32, want func(i int) float32) {
	t.Helper()
	for i, g := range got {
		if w := want(i); g != w {
			t.Fatalf("%v value %d = %v, want %v", typ, i, g, w)
		}
	}
}

func TestDequantizePlain(t *testing.T) {
	f32 := make([]byte, 12)
	binary.LittleEndian.PutUint32(f32, math.Float32bits(1.5))
	binary.LittleEndian.PutUint32(f32[4:], math.Float32bits(-2.25))
	binary.LittleEndian.PutUint32(f32[8:], math.Float32bits(3e-40))
	got := dequant(t, F32, f32, 3)
	if got[0] != 1.5 || got[1] != -2.25 || got[2] != float32(3e-40) {
		t.Errorf("F32: %v", got)
	}
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b}
	got = dequant(t, F16, f16, 4)
	if want := []float32{1, -2, 1.0 / (1 << 24), 65504}; !equalF32(got, want) {
		t.Errorf("F16: %v, want %v", got, want)
	}
	bf16 := []byte{0x80, 0x3f, 0x00, 0xc0, 0x49, 0x40}
	got = dequant(t, BF16, bf16, 3)
	if want := []float32{1, -2, 3.140625}; !equalF32(got, want) {
		t.Errorf("BF16: %v, want %v", got, want)
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDequantizeQ8_0(t *testing.T) {
	b := make([]byte, 2*blockQ8_0)
	le16(b, hHalf)
	le16(b[blockQ8_0:], hm2)
	for j := range QK {
		b[2+j] = byte(int8(j*8 - 128))
		b[blockQ8_0+2+j] = byte(int8(j - 16))
	}
	got := dequant(t, Q8_0, b, 2*QK)
	expectValues(t, Q8_0, got, func(i int) float32 {
		if i < QK {
			return float32(i*8-128) * 0.5
		}
		return float32(i-QK-16) * -2
	})
	if got[0] != -64 || got[31] != 60 || got[32] != 32 {
		t.Errorf("Q8_0 spot values %v %v %v", got[0], got[31], got[32])
	}
}

func TestDequantizeQ8_1(t *testing.T) {
	b := make([]byte, blockQ8_1)
	le16(b, hQuart)
	le16(b[2:], 0x7bff) // s is not used by dequantization
	for j := range QK {
		b[4+j] = byte(int8(3*j - 50))
	}
	expectValues(t, Q8_1, dequant(t, Q8_1, b, QK), func(i int) float32 { return float32(3*i-50) * 0.25 })
}

// TestDequantizeQ4_0 pins the nibble order: the low nibbles of qs[0..15] are
// values 0..15, the high nibbles values 16..31.
func TestDequantizeQ4_0(t *testing.T) {
	b := make([]byte, blockQ4_0)
	le16(b, hQuart)
	for j := range 16 {
		b[2+j] = byte(j) | byte(15-j)<<4
	}
	got := dequant(t, Q4_0, b, QK)
	expectValues(t, Q4_0, got, func(i int) float32 {
		if i < 16 {
			return float32(i-8) * 0.25
		}
		return float32(15-(i-16)-8) * 0.25
	})
	if got[0] != -2 || got[15] != 1.75 || got[16] != 1.75 || got[31] != -2 {
		t.Errorf("Q4_0 nibble order: %v", got)
	}
}

func TestDequantizeQ4_1(t *testing.T) {
	b := make([]byte, blockQ4_1)
	le16(b, hHalf)
	le16(b[2:], hm1)
	for j := range 16 {
		b[4+j] = byte(j) | byte(15-j)<<4
	}
	expectValues(t, Q4_1, dequant(t, Q4_1, b, QK), func(i int) float32 {
		if i < 16 {
			return float32(i)*0.5 - 1
		}
		return float32(15-(i-16))*0.5 - 1
	})
}

// q5Quant returns value i's five-bit quant from its low nibble (Q4_0 order)
// and bit i of qh.
func q5Quant(qs []byte, qh uint32, i int) int {
	var nib int
	if i < 16 {
		nib = int(qs[i] & 0xf)
	} else {
		nib = int(qs[i-16] >> 4)
	}
	return nib | int(qh>>i&1)<<4
}

func TestDequantizeQ5(t *testing.T) {
	const qh = 0x80010001 | 0x00f0_0f00 // bits 0, 16, 31 and two bytes' worth in the middle
	b0 := make([]byte, blockQ5_0)
	le16(b0, h1)
	binary.LittleEndian.PutUint32(b0[2:], qh)
	b1 := make([]byte, blockQ5_1)
	le16(b1, hHalf)
	le16(b1[2:], h1)
	binary.LittleEndian.PutUint32(b1[4:], qh)
	for j := range 16 {
		b0[6+j] = byte(j) | byte(j)<<4
		b1[8+j] = byte(j) | byte(j)<<4
	}
	qs := b0[6:]
	got0 := dequant(t, Q5_0, b0, QK)
	expectValues(t, Q5_0, got0, func(i int) float32 { return float32(q5Quant(qs, qh, i) - 16) })
	if got0[0] != 0 || got0[1] != -15 || got0[16] != 0 || got0[17] != -15 || got0[31] != 15 {
		t.Errorf("Q5_0 spot values: %v", got0)
	}
	got1 := dequant(t, Q5_1, b1, QK)
	expectValues(t, Q5_1, got1, func(i int) float32 { return float32(q5Quant(qs, qh, i))*0.5 + 1 })
	if got1[0] != 9 || got1[1] != 1.5 || got1[31] != 16.5 {
		t.Errorf("Q5_1 spot values: %v", got1)
	}
}

// The Q4_K/Q5_K scale bytes for scales {1, 2, 63, 17, 33, 5, 48, 60} and mins
// {0, 3, 62, 9, 40, 1, 32, 63}, packed by hand.
var (
	k4Scales = [8]uint8{1, 2, 63, 17, 33, 5, 48, 60}
	k4Mins   = [8]uint8{0, 3, 62, 9, 40, 1, 32, 63}
	k4Packed = []byte{0x81, 0x02, 0xff, 0xd1, 0x80, 0x03, 0xbe, 0xc9, 0x81, 0x15, 0x00, 0xfc}
)

func TestScaleMinK4(t *testing.T) {
	for j := range 8 {
		sc, m := scaleMinK4(j, k4Packed)
		if sc != k4Scales[j] || m != k4Mins[j] {
			t.Errorf("sub-block %d: scale %d min %d, want %d %d", j, sc, m, k4Scales[j], k4Mins[j])
		}
	}
	got := make([]byte, 12)
	putScaleMinK4(got, &k4Scales, &k4Mins)
	if string(got) != string(k4Packed) {
		t.Errorf("putScaleMinK4 = % x, want % x", got, k4Packed)
	}
}

func TestDequantizeQ4_K(t *testing.T) {
	b := make([]byte, blockQ4_K)
	le16(b, hHalf)
	le16(b[2:], hQuart)
	copy(b[4:], k4Packed)
	qs := b[16:]
	for i := range qs {
		j, l := i/32, i%32
		qs[i] = byte((l+j)%16) | byte((3*l+j)%16)<<4
	}
	got := dequant(t, Q4_K, b, QKK)
	expectValues(t, Q4_K, got, func(p int) float32 {
		s, j, l := p/32, p/64, p%32
		q := qs[32*j+l] & 0xf
		if p%64 >= 32 {
			q = qs[32*j+l] >> 4
		}
		return 0.5*float32(k4Scales[s])*float32(q) - 0.25*float32(k4Mins[s])
	})
	if got[0] != 0 || got[32] != -0.75 || got[64+5] != 173.5 {
		t.Errorf("Q4_K spot values %v %v %v", got[0], got[32], got[69])
	}
}

func TestDequantizeQ5_K(t *testing.T) {
	b := make([]byte, blockQ5_K)
	le16(b, hQuart)
	le16(b[2:], hHalf)
	copy(b[4:], k4Packed)
	qh, qs := b[16:48], b[48:]
	for i := range qh {
		qh[i] = byte(37*i + 11)
	}
	for i := range qs {
		qs[i] = byte(29*i + 7)
	}
	expectValues(t, Q5_K, dequant(t, Q5_K, b, QKK), func(p int) float32 {
		s, j, l, hi := p/32, p/64, p%32, p%64 >= 32
		q := qs[32*j+l] & 0xf
		bit := uint(2 * j)
		if hi {
			q = qs[32*j+l] >> 4
			bit++
		}
		q |= (qh[l] >> bit & 1) << 4
		return 0.25*float32(k4Scales[s])*float32(q) - 0.5*float32(k4Mins[s])
	})
}

// IQ4_XS: the 6-bit scales (four low bits in scales_l, two high in
// scales_h), less 32, times d and the table value of each index.
func TestDequantizeIQ4_XS(t *testing.T) {
	b := make([]byte, blockIQ4_XS)
	le16(b, hHalf)
	ls := [8]int{0, 63, 32, 31, 33, 17, 48, 5}
	var sh uint16
	for ib, l := range ls {
		b[4+ib/2] |= byte(l&0xf) << (4 * (ib % 2))
		sh |= uint16(l>>4) << (2 * ib)
	}
	le16(b[2:], sh)
	qs := b[8:]
	for i := range qs {
		qs[i] = byte(11*i + 3)
	}
	got := dequant(t, IQ4_XS, b, QKK)
	expectValues(t, IQ4_XS, got, func(p int) float32 {
		ib, j := p/32, p%32
		q := qs[16*ib+j%16] & 0xf
		if j >= 16 {
			q = qs[16*ib+j%16] >> 4
		}
		return 0.5 * float32(ls[ib]-32) * float32(IQ4NLValues[q])
	})
	// Index 3 of the first byte is -65; scale 0 is -32: 0.5*-32*-65.
	if got[0] != 1040 || got[64] != 0 {
		t.Errorf("IQ4_XS spot values %v %v", got[0], got[64])
	}
}

func TestDequantizeQ6_K(t *testing.T) {
	b := make([]byte, blockQ6_K)
	ql, qh, sc := b[:128], b[128:192], b[192:208]
	for i := range ql {
		ql[i] = byte(7 * i)
	}
	for i := range qh {
		qh[i] = byte(13*i + 5)
	}
	scales := []int8{-3, 1, 2, 127, -128, 5, -7, 9, 11, -13, 17, 19, -23, 29, 31, -37}
	for i, s := range scales {
		sc[i] = byte(s)
	}
	le16(b[208:], hEigth)
	got := dequant(t, Q6_K, b, QKK)
	expectValues(t, Q6_K, got, func(p int) float32 {
		n, r := p/128, p%128
		k, l := r/32, r%32
		lq := ql[64*n+l+32*(k&1)]
		nib := lq & 0xf
		if k >= 2 {
			nib = lq >> 4
		}
		h := qh[32*n+l] >> (2 * k) & 3
		q := int(nib|h<<4) - 32
		return 0.125 * float32(scales[p/16]) * float32(q)
	})
	if got[0] != 6 {
		t.Errorf("Q6_K value 0 = %v, want 6", got[0])
	}
}

func TestDequantizeQ2_K(t *testing.T) {
	b := make([]byte, blockQ2_K)
	sc, qs := b[:16], b[16:80]
	for i := range sc {
		sc[i] = byte(i) | byte(15-i)<<4
	}
	for i := range qs {
		qs[i] = byte(29*i + 3)
	}
	le16(b[80:], hHalf)
	le16(b[82:], hQuart)
	got := dequant(t, Q2_K, b, QKK)
	expectValues(t, Q2_K, got, func(p int) float32 {
		n, r := p/128, p%128
		k, l := r/32, r%32
		q := qs[32*n+l] >> (2 * k) & 3
		s := sc[p/16]
		return 0.5*float32(s&0xf)*float32(q) - 0.25*float32(s>>4)
	})
	if got[0] != -3.75 {
		t.Errorf("Q2_K value 0 = %v, want -3.75", got[0])
	}
}

func TestDequantizeQ3_K(t *testing.T) {
	b := make([]byte, blockQ3_K)
	hm, qs := b[:32], b[32:96]
	for i := range hm {
		hm[i] = byte(11*i + 1)
	}
	for i := range qs {
		qs[i] = byte(29*i + 3)
	}
	// Sixteen 6-bit scales (stored biased by 32), packed by hand.
	scales := [16]int{3, 8, 13, 18, 23, 28, 33, 38, 43, 48, 53, 58, 63, 4, 9, 14}
	copy(b[96:], []byte{0xb3, 0x08, 0x5d, 0xa2, 0xf7, 0x4c, 0x91, 0xe6, 0xe4, 0x34, 0x38, 0x39})
	le16(b[108:], hQuart)
	for j, want := range scales {
		if got := scaleQ3K(j, b[96:108]); got != want-32 {
			t.Errorf("Q3_K scale %d = %d, want %d", j, got, want-32)
		}
	}
	expectValues(t, Q3_K, dequant(t, Q3_K, b, QKK), func(p int) float32 {
		n, r := p/128, p%128
		k, l := r/32, r%32
		q := int(qs[32*n+l] >> (2 * k) & 3)
		if hm[l]>>(4*n+k)&1 == 0 {
			q -= 4
		}
		return 0.25 * float32(scales[p/16]-32) * float32(q)
	})
}

func TestDequantizeQ8_K(t *testing.T) {
	b := make([]byte, blockQ8_K)
	binary.LittleEndian.PutUint32(b, math.Float32bits(-0.5))
	for i := range QKK {
		b[4+i] = byte(int8(i - 128))
	}
	expectValues(t, Q8_K, dequant(t, Q8_K, b, QKK), func(i int) float32 { return -0.5 * float32(i-128) })
}

func TestDequantizeErrors(t *testing.T) {
	for _, c := range []struct {
		typ  Type
		n    int
		size int
		want string
	}{
		{Q8_0, 33, 34, "not a multiple of its block size 32"},
		{Q8_0, 32, 33, "32 values need 34 bytes, have 33"},
		{Q8_0, 64, 34, "64 values need 68 bytes, have 34"},
		{Q4_K, 255, 144, "Q4_K"},
		{Q6_K, 256, 0, "256 values need 210 bytes, have 0"},
		{F16, 3, 8, "3 values need 6 bytes, have 8"},
		{I8, 4, 4, "I8"},
		{Type(99), 4, 4, "type(99)"},
	} {
		dst := make([]float32, c.n)
		for i := range dst {
			dst[i] = 42
		}
		err := DequantizeRow(c.typ, dst, make([]byte, c.size))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DequantizeRow(%v, %d values, %d bytes) = %v, want an error containing %q", c.typ, c.n, c.size, err, c.want)
		}
		for _, v := range dst {
			if v != 42 {
				t.Errorf("DequantizeRow(%v) wrote dst despite failing", c.typ)
				break
			}
		}
	}
	for _, typ := range []Type{I8, I32, F64, Type(1000)} {
		if err := DequantizeRow(typ, nil, nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("DequantizeRow(%v) = %v, want ErrUnsupported", typ, err)
		}
	}
	if err := DequantizeRow(Q4_0, nil, nil); err != nil {
		t.Errorf("empty row: %v", err)
	}
}
