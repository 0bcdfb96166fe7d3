package cuda

import "testing"

// The memo finds values put before, by value, and overwrites the least
// recently used slot when full.
func TestArgMemo(t *testing.T) {
	m := argMemo{base: 1 << 20}
	if _, ok := m.find([]byte{1}); ok {
		t.Fatal("found in an empty memo")
	}
	slots := map[uint64]bool{}
	for i := range argSlots {
		p := m.put([]byte{byte(i), 7})
		if slots[p] {
			t.Fatalf("slot %#x given twice while free ones remain", p)
		}
		slots[p] = true
	}
	p0, ok := m.find([]byte{0, 7})
	if !ok {
		t.Fatal("the first values lost with the memo not yet full")
	}
	// Values 1 are now the least recent: a new array takes their slot.
	p1, _ := m.find([]byte{1, 7})
	m.find([]byte{0, 7})
	for i := 2; i < argSlots; i++ {
		m.find([]byte{byte(i), 7})
	}
	if p := m.put([]byte{99}); p != p1 {
		t.Errorf("new values went to %#x, not the least recent slot %#x", p, p1)
	}
	if _, ok := m.find([]byte{1, 7}); ok {
		t.Error("overwritten values still found")
	}
	if p, ok := m.find([]byte{0, 7}); !ok || p != p0 {
		t.Error("recently used values lost")
	}
	if _, ok := m.find([]byte{0}); ok {
		t.Error("a prefix of stored values found as them")
	}
}
