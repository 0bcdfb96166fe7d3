package adapt

import (
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/engine/tree"
)

func TestTextMemoryByHand(t *testing.T) {
	m := NewTextMemory(1000)
	m.Begin()
	m.Append([]int{1, 2, 3, 4, 5, 6})
	m.Begin()
	m.Append([]int{9, 2, 3, 7, 8})
	// The longest suffix wins over the latest occurrence of a shorter one.
	if got, n := m.Lookup([]int{0, 1, 2, 3}, 8); !slices.Equal(got, []int{4, 5, 6}) || n != 3 {
		t.Errorf("after 1 2 3: %v (suffix %d), want [4 5 6] from the first sequence (3)", got, n)
	}
	// Among equals, the latest; a continuation stops at the end of the text.
	if got, n := m.Lookup([]int{5, 2, 3}, 8); !slices.Equal(got, []int{7, 8}) || n != 2 {
		t.Errorf("after 2 3: %v (suffix %d), want [7 8] (2)", got, n)
	}
	// ... and at the end of a sequence: nothing runs into the next one.
	if got, _ := m.Lookup([]int{5, 6}, 8); got != nil {
		t.Errorf("after 5 6: %v, want nothing (the sequence ended)", got)
	}
	if got, _ := m.Lookup([]int{4, 5}, 1); !slices.Equal(got, []int{6}) {
		t.Errorf("after 4 5, at most 1: %v, want [6]", got)
	}
	// Single tokens are not looked up.
	if got, _ := m.Lookup([]int{7}, 8); got != nil {
		t.Errorf("after 7 alone: %v, want nothing", got)
	}
	m.Reset()
	if got, _ := m.Lookup([]int{1, 2, 3}, 8); got != nil || m.Len() != 0 {
		t.Errorf("after Reset: %v, %d tokens held", got, m.Len())
	}
}

// bruteLookup is Lookup by scanning the held text: for each suffix length,
// longest first, the latest occurrence inside the ring and its
// continuation, if that is not empty.
func bruteLookup(text []int, capacity int, ctx []int, limit int) ([]int, int) {
	held := max(0, len(text)-capacity)
	for _, n := range memoryGrams {
		if n > len(ctx) {
			continue
		}
		for end := len(text); end-n >= held; end-- {
			if !slices.Equal(text[end-n:end], ctx[len(ctx)-n:]) {
				continue
			}
			var out []int
			for p := end; p < len(text) && len(out) < limit && text[p] != memorySep; p++ {
				out = append(out, text[p])
			}
			if len(out) > 0 {
				return out, n
			}
			break // only the latest occurrence is indexed
		}
	}
	return nil, 0
}

// Against the brute force on random repetitive text that overflows the
// ring: whatever it proposes is the brute force's proposal for that suffix
// (never an evicted or colliding one), and it misses few.
func TestTextMemoryAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ capacity, vocab, tokens int }{{64, 3, 500}, {300, 5, 2000}, {5000, 4, 3000}} {
		m := NewTextMemory(tc.capacity)
		var text []int
		hits, found, lookups := 0, 0, 0
		for len(text) < tc.tokens {
			if rng.IntN(20) == 0 {
				m.Begin()
				if len(text) > 0 && text[len(text)-1] != memorySep {
					text = append(text, memorySep)
				}
			}
			chunk := make([]int, 1+rng.IntN(7))
			for i := range chunk {
				chunk[i] = rng.IntN(tc.vocab)
			}
			m.Append(chunk)
			text = append(text, chunk...)
			ctx := make([]int, 1+rng.IntN(18))
			for i := range ctx {
				ctx[i] = rng.IntN(tc.vocab)
			}
			if rng.IntN(2) == 0 { // a context that is the text's own suffix
				if lo := len(text) - len(ctx); lo >= 0 && !slices.Contains(text[lo:], memorySep) {
					copy(ctx, text[lo:])
				}
			}
			limit := 1 + rng.IntN(9)
			got, n := m.Lookup(ctx, limit)
			want, wn := bruteLookup(text, tc.capacity, ctx, limit)
			lookups++
			if want != nil {
				found++
			}
			if got == nil {
				continue
			}
			hits++
			if n == wn && !slices.Equal(got, want) || n > wn {
				t.Fatalf("capacity %d, lookup %d after %v: got %v (suffix %d), brute force %v (suffix %d)", tc.capacity, lookups, ctx, got, n, want, wn)
			}
			if n < wn { // the longer suffix's entry was overwritten: check the shorter one
				if alt, _ := bruteLookup(text, tc.capacity, ctx[len(ctx)-n:], limit); !slices.Equal(alt, got) {
					t.Fatalf("capacity %d: got %v for suffix %d, brute force %v", tc.capacity, got, n, alt)
				}
			}
		}
		t.Logf("capacity %d: %d lookups, brute force found %d, memory %d", tc.capacity, lookups, found, hits)
		if hits < found*8/10 {
			t.Errorf("capacity %d: proposed %d times where the brute force did %d", tc.capacity, hits, found)
		}
	}
}

// A saved memory loads into one that proposes the same, keeping the newest
// entries when the new one is smaller; damaged or foreign files are
// refused and leave the memory as it was.
func TestTextMemorySaveLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := NewTextMemory(500)
	var text []int
	for i := range 40 {
		m.Begin()
		if i > 0 {
			text = append(text, memorySep)
		}
		seq := make([]int, 5+rng.IntN(30))
		for i := range seq {
			seq[i] = rng.IntN(7)
		}
		m.Append(seq)
		text = append(text, seq...)
	}
	data := m.Marshal("model.gguf")
	for _, capacity := range []int{500, 100} {
		l := NewTextMemory(capacity)
		if label, err := l.Load(data, 7); err != nil || label != "model.gguf" {
			t.Fatalf("label %q, %v", label, err)
		}
		if capacity == 500 && !slices.Equal(l.Marshal("model.gguf"), data) {
			t.Errorf("capacity %d: the loaded memory saves differently", capacity)
		}
		hits := 0
		for range 300 {
			ctx := make([]int, 2+rng.IntN(10))
			for i := range ctx {
				ctx[i] = rng.IntN(7)
			}
			got, n := l.Lookup(ctx, 6)
			if got == nil {
				continue
			}
			hits++
			if want, _ := bruteLookup(text, capacity, ctx[len(ctx)-n:], 6); !slices.Equal(got, want) {
				t.Fatalf("capacity %d, after %v: loaded proposes %v (suffix %d), the text %v", capacity, ctx, got, n, want)
			}
		}
		if hits < 100 {
			t.Errorf("capacity %d: %d proposals in 300 lookups", capacity, hits)
		}
	}
	l := NewTextMemory(500)
	l.Append([]int{1, 2, 3, 1, 2})
	before := l.Marshal("")
	for name, bad := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXXXXXXX"), data[8:]...),
		"truncated": data[:len(data)-9],
		"flipped":   append(append([]byte(nil), data[:20]...), append([]byte{data[20] ^ 1}, data[21:]...)...),
	} {
		if _, err := l.Load(bad, 7); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := l.Load(data, 6); err == nil {
		t.Error("tokens outside a vocabulary of 6: loaded")
	}
	if !slices.Equal(l.Marshal(""), before) {
		t.Error("a refused load changed the memory")
	}
}

// The text memory's cost per drafting round: a lookup in a full memory
// and a graft onto a 16-node tree (against milliseconds for a round).
func BenchmarkTextMemoryRound(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	m := NewTextMemory(1 << 18)
	text := make([]int, 1<<18)
	for i := range text {
		text[i] = rng.IntN(512)
	}
	for i := 0; i < len(text); i += 96 {
		m.Begin()
		m.Append(text[i:min(i+96, len(text))])
	}
	tree := &tree.Tree{}
	for i := range 16 {
		p := i/2 - 1
		d := 1
		if p >= 0 {
			d = tree.Depths[p] + 1
		}
		tree.Add(1000+i, p, d, -float64(i))
	}
	ctx := append([]int(nil), text[5000:5100]...)
	b.ResetTimer()
	for b.Loop() {
		chain, _ := m.Lookup(ctx, 8)
		tree.Graft(chain, 16)
	}
}

// Sequences of a server share one memory: appends and lookups from several
// goroutines (run under -race).
func TestTextMemoryConcurrent(t *testing.T) {
	m := NewTextMemory(4096)
	done := make(chan bool)
	for g := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 300 {
				seq := []int{rng.IntN(5), rng.IntN(5), rng.IntN(5)}
				if rng.IntN(10) == 0 {
					m.Begin()
				}
				m.Append(seq)
				if got, n := m.Lookup(seq[1:], 4); got != nil && (n < 2 || len(got) > 4) {
					t.Errorf("lookup: %v after a suffix of %d", got, n)
				}
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
	if m.Len() < 3600 {
		t.Errorf("%d entries held after 3600 tokens", m.Len())
	}
}
