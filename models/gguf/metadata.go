package gguf

import "fmt"

// The accessors below accept any integer or float width for numbers, since
// converters disagree on widths (context_length is uint32 in one file and
// uint64 in another).

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	s, isStr := v.(string)
	return s, ok && isStr
}

// Uint returns a non-negative integer value.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return toUint(v)
}

// Float returns a number as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := toInt(v); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Get(key)
	b, isBool := v.(bool)
	return b, ok && isBool
}

// Array returns an array value.
func (f *File) Array(key string) (Array, bool) {
	v, ok := f.Get(key)
	a, isArr := v.(Array)
	return a, ok && isArr
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, bool) {
	a, ok := f.Array(key)
	s, isStr := a.Values.([]string)
	return s, ok && isStr
}

// Float32s returns a float32 array.
func (f *File) Float32s(key string) ([]float32, bool) {
	a, ok := f.Array(key)
	s, isF := a.Values.([]float32)
	return s, ok && isF
}

// Ints returns an array of any integer type as ints.
func (f *File) Ints(key string) ([]int, bool) {
	a, ok := f.Array(key)
	if !ok {
		return nil, false
	}
	n := a.Len()
	out := make([]int, n)
	for i := 0; i < n; i++ {
		v, ok := toInt(index(a.Values, i))
		if !ok {
			return nil, false
		}
		out[i] = int(v)
	}
	return out, true
}

func index(s any, i int) any {
	switch v := s.(type) {
	case []uint8:
		return v[i]
	case []int8:
		return v[i]
	case []uint16:
		return v[i]
	case []int16:
		return v[i]
	case []uint32:
		return v[i]
	case []int32:
		return v[i]
	case []uint64:
		return v[i]
	case []int64:
		return v[i]
	}
	return nil
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > 1<<62 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

func toUint(v any) (uint64, bool) {
	if x, ok := v.(uint64); ok {
		return x, true
	}
	i, ok := toInt(v)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// FormatValue renders a metadata value for display, eliding long arrays.
func FormatValue(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 80 {
			return fmt.Sprintf("%q…", x[:80])
		}
		return fmt.Sprintf("%q", x)
	case Array:
		return fmt.Sprintf("[%d × %s]", x.Len(), x.Type)
	}
	return fmt.Sprint(v)
}
