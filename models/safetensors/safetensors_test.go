package safetensors

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestReadTinyStories(t *testing.T) {
	f, err := Read("../../testdata/models/tinystories656K/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
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
}

func TestBadFiles(t *testing.T) {
	mk := func(hdr string, data int) []byte {
		b := make([]byte, 8+len(hdr)+data)
		binary.LittleEndian.PutUint64(b, uint64(len(hdr)))
		copy(b[8:], hdr)
		return b
	}
	cases := map[string][]byte{
		"truncated":   {1, 2},
		"header size": mk(`{}`, 0)[:9],
		"json":        mk(`{"a":`, 0),
		"dtype":       mk(`{"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}}`, 4),
		"offsets":     mk(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4),
		"size":        mk(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8),
	}
	for name, b := range cases {
		if _, err := Parse("x.safetensors", b); err == nil || !strings.HasPrefix(err.Error(), "x.safetensors: ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}
