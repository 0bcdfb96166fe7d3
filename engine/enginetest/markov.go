package enginetest

import (
	"fmt"
	"math/rand/v2"
)

// Markov is a synthetic Target whose logits depend only on the token just
// run: exact distributions are cheap to compute and sampling millions of
// tokens takes seconds. It keeps the Target contract (pending tree nodes,
// Commit of a chain) so the engine cannot tell it from a model.
type Markov struct {
	table     [][]float32 // [token] → logits of the next token
	committed []int
	pending   []int // tokens
	parents   []int
	out       []float32
	outs      [][]float32
	hid       [][]float32
	Ctx       int // the context, 1<<20 unless a test sets it
}

// NewMarkov is a Markov target over vocab tokens, its logits drawn from
// seed with standard deviation scale.
func NewMarkov(vocab int, seed uint64, scale float64) *Markov {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := &Markov{Ctx: 1 << 20}
	for range vocab {
		row := make([]float32, vocab)
		for j := range row {
			row[j] = float32(rng.NormFloat64() * scale)
		}
		m.table = append(m.table, row)
	}
	return m
}

func (m *Markov) Forward(tokens []int) ([]float32, error) {
	m.pending, m.parents = m.pending[:0], m.parents[:0]
	m.committed = append(m.committed, tokens...)
	m.out = m.table[tokens[len(tokens)-1]]
	return m.out, nil
}

func (m *Markov) ForwardFeatures(tokens []int) ([]float32, [][]float32, error) {
	lg, _ := m.Forward(tokens)
	hid := make([][]float32, len(tokens))
	for i, tok := range tokens {
		hid[i] = []float32{float32(tok)}
	}
	return lg, hid, nil
}

func (m *Markov) Extend(tokens, parents []int) ([][]float32, [][]float32, error) {
	m.outs, m.hid = m.outs[:0], m.hid[:0]
	for i, tok := range tokens {
		if parents[i] < -1 || parents[i] >= len(m.pending) {
			return nil, nil, fmt.Errorf("bad parent %d", parents[i])
		}
		m.pending = append(m.pending, tok)
		m.parents = append(m.parents, parents[i])
		m.outs = append(m.outs, m.table[tok])
		m.hid = append(m.hid, []float32{float32(tok)})
	}
	return m.outs, m.hid, nil
}

func (m *Markov) Commit(path []int) error {
	for k, p := range path {
		want := -1
		if k > 0 {
			want = path[k-1]
		}
		if m.parents[p] != want {
			return fmt.Errorf("not a chain")
		}
		m.committed = append(m.committed, m.pending[p])
	}
	m.pending, m.parents = m.pending[:0], m.parents[:0]
	return nil
}

func (m *Markov) Len() int { return len(m.committed) }
func (m *Markov) Truncate(n int) error {
	m.committed = m.committed[:n]
	m.pending, m.parents = m.pending[:0], m.parents[:0]
	return nil
}
func (m *Markov) Context() int { return m.Ctx }
func (m *Markov) Vocab() int   { return len(m.table) }
