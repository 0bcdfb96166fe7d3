package torchbin

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"dovetail/internal/atomicfile"
	"dovetail/models/safetensors"
)

// Write writes tensors as torch.save writes a state dict (an OrderedDict
// pickled with protocol 2, one storage per tensor, stored uncompressed),
// atomically: synthetic checkpoints in the published PyTorch form, for
// tests.
func Write(path string, tensors []*safetensors.Tensor) error {
	return atomicfile.Write(path, func(out io.Writer) error { return write(out, tensors) })
}

func write(out io.Writer, tensors []*safetensors.Tensor) error {
	z := zip.NewWriter(out)
	var pkl bytes.Buffer
	p := pickler{&pkl}
	p.op(0x80, 2) // PROTO 2
	p.global("collections", "OrderedDict")
	p.op(')', 'R', '(') // EMPTY_TUPLE, REDUCE, MARK
	for i, t := range tensors {
		cls := ""
		for c, dt := range storageTypes {
			if dt == t.DType {
				cls = c
			}
		}
		if cls == "" {
			return fmt.Errorf("torchbin: tensor %s: dtype %s has no torch storage", t.Name, t.DType)
		}
		key := strconv.Itoa(i)
		n := len(t.Data) / elemSize(t.DType)
		p.str(t.Name)
		p.global("torch._utils", "_rebuild_tensor_v2")
		p.op('(', '(') // the arguments; the persistent id
		p.str("storage")
		p.global("torch", cls)
		p.str(key)
		p.str("cpu")
		p.int(n)
		p.op('t', 'Q') // TUPLE, BINPERSID
		p.int(0)       // storage offset
		p.ints(t.Shape)
		p.ints(rowMajor(t.Shape))
		p.op(0x89) // NEWFALSE: requires_grad
		p.global("collections", "OrderedDict")
		p.op(')', 'R', 't', 'R') // backward hooks; the arguments' TUPLE; REDUCE
		w, err := z.CreateHeader(&zip.FileHeader{Name: "archive/data/" + key, Method: zip.Store})
		if err != nil {
			return err
		}
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	p.op('u', '.') // SETITEMS, STOP
	for _, f := range []struct {
		name string
		data []byte
	}{{"archive/data.pkl", pkl.Bytes()}, {"archive/version", []byte("3\n")}} {
		w, err := z.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Store})
		if err != nil {
			return err
		}
		if _, err := w.Write(f.data); err != nil {
			return err
		}
	}
	return z.Close()
}

// rowMajor is the strides of a contiguous tensor of shape.
func rowMajor(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// pickler writes the few pickle opcodes a state dict needs.
type pickler struct{ b *bytes.Buffer }

func (p pickler) op(ops ...byte) { p.b.Write(ops) }

func (p pickler) global(module, name string) {
	p.b.WriteString("c" + module + "\n" + name + "\n")
}

func (p pickler) str(s string) {
	p.b.WriteByte('X') // BINUNICODE
	binary.Write(p.b, binary.LittleEndian, uint32(len(s)))
	p.b.WriteString(s)
}

func (p pickler) int(v int) {
	p.b.WriteByte('J') // BININT
	binary.Write(p.b, binary.LittleEndian, int32(v))
}

func (p pickler) ints(vs []int) {
	p.op('(')
	for _, v := range vs {
		p.int(v)
	}
	p.op('t')
}
