package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"dovetail/quant"
)

func (t *Tensor) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: tensor %q: %s", t.File, t.Name, fmt.Sprintf(format, a...))
}

// Float32 converts a float tensor (F32, F16, BF16) to float32 values.
func (t *Tensor) Float32() ([]float32, error) {
	n := t.Count()
	v := make([]float32, n)
	switch t.DType {
	case "F32":
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "F16":
		for i := range v {
			v[i] = quant.F16ToF32(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	case "BF16":
		for i := range v {
			v[i] = quant.BF16ToF32(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	default:
		return nil, t.errorf("dtype %s, want F32, F16 or BF16", t.DType)
	}
	return v, nil
}

// Int64s converts an integer tensor (I64, I32) to int64 values.
func (t *Tensor) Int64s() ([]int64, error) {
	v := make([]int64, t.Count())
	switch t.DType {
	case "I64":
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	case "I32":
		for i := range v {
			v[i] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	default:
		return nil, t.errorf("dtype %s, want I64 or I32", t.DType)
	}
	return v, nil
}

// Bools reads a BOOL tensor: one byte a value, 0 or 1.
func (t *Tensor) Bools() ([]bool, error) {
	if t.DType != "BOOL" {
		return nil, t.errorf("dtype %s, want BOOL", t.DType)
	}
	v := make([]bool, len(t.Data))
	for i, b := range t.Data {
		if b > 1 {
			return nil, t.errorf("value %d at %d is not a boolean (0 or 1)", b, i)
		}
		v[i] = b == 1
	}
	return v, nil
}

// NonFinite is the index of the first NaN or infinity of a float tensor,
// or -1: checked on the stored bits, without converting the tensor.
func (t *Tensor) NonFinite() int {
	switch t.DType {
	case "F32":
		for i := 0; i+4 <= len(t.Data); i += 4 {
			if binary.LittleEndian.Uint32(t.Data[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
	case "F16", "BF16":
		mask := uint16(0x7c00)
		if t.DType == "BF16" {
			mask = 0x7f80
		}
		for i := 0; i+2 <= len(t.Data); i += 2 {
			if binary.LittleEndian.Uint16(t.Data[i:])&mask == mask {
				return i / 2
			}
		}
	}
	return -1
}
