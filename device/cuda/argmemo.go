package cuda

import "bytes"

// A decode step's layers all rotate by the same positions and mask by the
// same tree: each of those small arrays is uploaded once a step, not once
// a layer (an upload is a driver call, a few microseconds of the host's
// time a layer). argMemo keeps the last argSlots arrays uploaded, each in
// a slot of argSlotBytes of device memory, by their values. A slot is
// overwritten only by an upload on the device's stream, which runs after
// every kernel queued before it: those still read the old values.
const (
	argSlots     = 16
	argSlotBytes = 4 << 10
)

type argMemo struct {
	base  uint64 // argSlots × argSlotBytes of device memory, 0 until first used
	vals  [argSlots][]byte
	used  [argSlots]uint64 // clock at last use: the least recent is overwritten
	clock uint64
}

// find is the device address of values b uploaded before.
func (m *argMemo) find(b []byte) (uint64, bool) {
	if m.base == 0 {
		return 0, false
	}
	for i, v := range m.vals {
		if v != nil && bytes.Equal(v, b) {
			m.clock++
			m.used[i] = m.clock
			return m.slot(i), true
		}
	}
	return 0, false
}

// put takes the least recently used slot for values b (at most
// argSlotBytes) and returns its address, which the caller uploads b to.
func (m *argMemo) put(b []byte) uint64 {
	lru := 0
	for i := range m.used {
		if m.used[i] < m.used[lru] {
			lru = i
		}
	}
	m.clock++
	m.used[lru] = m.clock
	m.vals[lru] = append(m.vals[lru][:0], b...)
	return m.slot(lru)
}

func (m *argMemo) slot(i int) uint64 { return m.base + uint64(i)*argSlotBytes }
