package safetensors

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestReadTinyStories(t *testing.T) {
	f, err := Open("../../testdata/models/tinystories656K/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lm := f.Tensors["lm_head.weight"]
	if lm == nil || lm.DType != "F32" || lm.Shape[0] != 2048 || lm.Shape[1] != 128 || len(lm.Data) != 2048*128*4 {
		t.Fatalf("lm_head.weight: %+v", lm)
	}
	if len(f.Names()) != 1+2*9+1 {
		t.Errorf("%d tensors: %v", len(f.Names()), f.Names())
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata)
	}
	if _, err := lm.Float32(); err != nil {
		t.Error(err)
	}
}

func TestBadFiles(t *testing.T) {
	mk := func(hdr string, data int) []byte {
		b := make([]byte, 8+len(hdr)+data)
		binary.LittleEndian.PutUint64(b, uint64(len(hdr)))
		copy(b[8:], hdr)
		return b
	}
	cases := []struct {
		name string
		buf  []byte
		want string
	}{
		{"truncated", []byte{1, 2}, "header length: file is 2 bytes"},
		{"header size", mk(`{}`, 0)[:9], "header length: 2 bytes does not fit"},
		{"json", mk(`{"a":`, 0), "header: not a safetensors header"},
		{"dtype", mk(`{"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}}`, 4), `tensor "a": unsupported dtype "Q9"`},
		{"offsets", mk(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), `tensor "a": data_offsets [0 8] outside`},
		{"reversed", mk(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4), `tensor "a": data_offsets [4 0] outside`},
		{"size", mk(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), `tensor "a": 8 bytes for shape [3] of F32`},
		{"shape", mk(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), `tensor "a": bad shape [-1]`},
		{"overlap", mk(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8),
			`tensor "b": data_offsets [4 8] overlap tensor "a"'s [0 8]`},
	}
	for _, c := range cases {
		_, err := Parse("x.safetensors", c.buf)
		if err == nil || !strings.HasPrefix(err.Error(), "x.safetensors: ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
