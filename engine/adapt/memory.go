package adapt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
)

// TextMemory remembers the text the target verified, across requests, and
// proposes what followed the latest earlier occurrence of a context's
// longest remembered suffix (prompt lookup over everything decoded, as
// llama.cpp's dynamic n-gram cache and SuffixDecoding do). It is the part
// of online adaptation that needs no training: a draft's weights learn a
// new domain from thousands of positions, while text that recurs — a
// style a model falls into, templates, code being edited — is proposed
// from its second occurrence on.
//
// It holds the newest tokens (its capacity) in a ring and an index from hashed
// n-grams (n in memoryGrams) to where each last ended. The index is a
// fixed table that a colliding n-gram overwrites, so its memory is
// bounded; every hit is checked against the ring, so a collision or an
// overwritten position only loses a proposal. It is safe for concurrent
// use.
type TextMemory struct {
	mu    sync.Mutex
	ring  []int32 // token, or memorySep between sequences
	head  int64   // tokens ever appended: ring[head % len] is the next slot
	table []int64 // n-gram hash → the position after its latest occurrence, +1 (0: empty)
	mask  uint64
	open  bool // a sequence is being appended
}

// memoryGrams are the suffix lengths looked up, longest first. A single token
// proposes too often wrongly to be looked up
// (docs/measurements/adaptation.md, "A text memory of verified text").
var memoryGrams = []int{16, 12, 8, 6, 5, 4, 3, 2}

const memorySep = -1

// NewTextMemory remembers up to capacity tokens (at least 64), separators
// between sequences included.
func NewTextMemory(capacity int) *TextMemory {
	capacity = max(capacity, 64)
	slots := memorySlots(capacity)
	return &TextMemory{ring: make([]int32, capacity), table: make([]int64, slots), mask: uint64(slots - 1)}
}

// memorySlots is the index's size: a power of two, four slots a token.
func memorySlots(capacity int) int {
	slots := 1
	for slots < 4*capacity {
		slots <<= 1
	}
	return slots
}

// TextMemoryBytes is what a text memory of capacity tokens takes (0 for
// none): the ring and the index.
func TextMemoryBytes(capacity int) uint64 {
	if capacity <= 0 {
		return 0
	}
	capacity = max(capacity, 64)
	return 4*uint64(capacity) + 8*uint64(memorySlots(capacity))
}

// Len is the number of tokens remembered, separators included.
func (m *TextMemory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int(min(m.head, int64(len(m.ring))))
}

// Appended counts the entries ever appended, separators included: it
// changes whenever the memory does.
func (m *TextMemory) Appended() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.head
}

// Begin starts a new sequence: no proposal runs from the previous one
// into it.
func (m *TextMemory) Begin() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open {
		m.put(memorySep)
	}
	m.open = false
}

// Append adds tokens to the current sequence.
func (m *TextMemory) Append(tokens []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range tokens {
		m.push(int32(t))
	}
}

// push appends an entry and indexes every n-gram that ends with it.
func (m *TextMemory) push(t int32) {
	m.put(t)
	m.open = t != memorySep
	for _, n := range memoryGrams {
		if int64(n) > m.head || n > len(m.ring) {
			continue
		}
		if h, ok := m.hashRing(m.head-int64(n), n); ok {
			m.table[h&m.mask] = m.head + 1
		}
	}
}

func (m *TextMemory) put(t int32) {
	m.ring[m.head%int64(len(m.ring))] = t
	m.head++
}

func (m *TextMemory) at(pos int64) int32 { return m.ring[pos%int64(len(m.ring))] }

// held reports whether absolute positions [lo, hi) are still in the ring.
func (m *TextMemory) held(lo, hi int64) bool {
	return lo >= 0 && hi <= m.head && m.head-lo <= int64(len(m.ring))
}

// hashRing hashes the n tokens from pos; false if a separator is among them.
func (m *TextMemory) hashRing(pos int64, n int) (uint64, bool) {
	h := gramSeed(n)
	for i := range int64(n) {
		t := m.at(pos + i)
		if t == memorySep {
			return 0, false
		}
		h = gramMix(h, uint64(t))
	}
	return h, true
}

func gramSeed(n int) uint64 { return 0x9e3779b97f4a7c15 ^ uint64(n)*0xbf58476d1ce4e5b9 }

func gramMix(h, t uint64) uint64 {
	h ^= t + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	return h * 0x94d049bb133111eb
}

// Reset forgets everything.
func (m *TextMemory) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.table)
	m.head, m.open = 0, false
}

// Lookup returns up to max tokens that followed the latest remembered
// occurrence of ctx's longest suffix among memoryGrams, and that suffix's
// length; nil and 0 when none is remembered.
func (m *TextMemory) Lookup(ctx []int, max int) (tokens []int, n int) {
	if max <= 0 {
		return nil, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range memoryGrams {
		if n > len(ctx) {
			continue
		}
		suffix := ctx[len(ctx)-n:]
		h := gramSeed(n)
		for _, t := range suffix {
			h = gramMix(h, uint64(t))
		}
		end := m.table[h&m.mask] - 1 // the position after the occurrence
		if end < 0 || end >= m.head || !m.held(end-int64(n), end) {
			continue
		}
		match := true
		for i, t := range suffix {
			if m.at(end-int64(n)+int64(i)) != int32(t) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		var out []int
		for p := end; p < m.head && len(out) < max; p++ {
			t := m.at(p)
			if t == memorySep {
				break
			}
			out = append(out, int(t))
		}
		if len(out) > 0 {
			return out, n
		}
	}
	return nil, 0
}

// memoryMagic starts a saved text memory: name and format version.
const memoryMagic = "DVTXMEM2"

// Marshal saves the text held under a label (the model it was verified
// by): the magic, the label's length (uint32) and bytes, the number of
// entries (uint32), the entries oldest first (int32, −1 between
// sequences), and a CRC-32 (IEEE) of everything before it, all
// little-endian.
func (m *TextMemory) Marshal(label string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	lo := max(0, m.head-int64(len(m.ring)))
	n := m.head - lo
	out := make([]byte, 0, len(memoryMagic)+8+len(label)+4*int(n)+4)
	out = append(out, memoryMagic...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(label)))
	out = append(out, label...)
	out = binary.LittleEndian.AppendUint32(out, uint32(n))
	for p := lo; p < m.head; p++ {
		out = binary.LittleEndian.AppendUint32(out, uint32(m.at(p)))
	}
	return binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(out))
}

// ParseMemory checks a saved text memory and returns its label and
// entries. A token outside [0, vocab) is refused: a memory saved for
// another vocabulary.
func ParseMemory(data []byte, vocab int) (label string, entries []int32, err error) {
	if len(data) < len(memoryMagic)+12 || string(data[:len(memoryMagic)]) != memoryMagic {
		return "", nil, errors.New("text memory: not a saved text memory (bad magic or too short)")
	}
	body := data[:len(data)-4]
	if got, want := crc32.ChecksumIEEE(body), binary.LittleEndian.Uint32(data[len(data)-4:]); got != want {
		return "", nil, fmt.Errorf("text memory: checksum %08x, want %08x: the file is damaged", got, want)
	}
	rest := body[len(memoryMagic):]
	ln := int(binary.LittleEndian.Uint32(rest))
	if ln > len(rest)-8 {
		return "", nil, fmt.Errorf("text memory: a label of %d bytes in %d", ln, len(data))
	}
	label, rest = string(rest[4:4+ln]), rest[4+ln:]
	n := int(binary.LittleEndian.Uint32(rest))
	if rest = rest[4:]; len(rest) != 4*n {
		return "", nil, fmt.Errorf("text memory: %d bytes for %d entries", len(rest), n)
	}
	entries = make([]int32, n)
	for i := range entries {
		t := int32(binary.LittleEndian.Uint32(rest[4*i:]))
		if t < memorySep || int(t) >= vocab {
			return "", nil, fmt.Errorf("text memory: entry %d is token %d, outside the vocabulary [0, %d)", i, t, vocab)
		}
		entries[i] = t
	}
	return label, entries, nil
}

// Load replaces what m holds with a saved memory (ParseMemory's checks),
// as many of its newest entries as m holds, and returns its label. On an error m is
// unchanged.
func (m *TextMemory) Load(data []byte, vocab int) (label string, err error) {
	label, text, err := ParseMemory(data, vocab)
	if err != nil {
		return "", err
	}
	text = text[max(0, len(text)-len(m.ring)):]
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.table)
	m.head, m.open = 0, false
	for _, t := range text {
		m.push(t)
	}
	return label, nil
}
