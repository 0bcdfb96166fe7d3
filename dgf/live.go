package dgf

import (
	"fmt"
	"sync"
	"sync/atomic"

	"dovetail/device"
	"dovetail/models/draft"
)

// Clone copies d's weights into a new draft on dev. The frozen embeddings
// and LM head are shared when dev holds them too — d's own device, or
// another stream of the same GPU (nobody writes them) — and uploaded again
// otherwise.
func (d *Draft) Clone(dev device.Device) (_ *Draft, err error) {
	defer device.Catch(&err)
	c := d.frozenTwin(dev)
	if !device.SameMemory(dev, d.Dev) {
		if c.Embd, err = dev.UploadMatrix(d.embdT); err != nil {
			return nil, err
		}
		if d.headT != nil {
			if c.Head, err = dev.UploadMatrix(d.headT); err != nil {
				return nil, err
			}
		}
	}
	c.bind(false)
	return c, c.CopyWeights(d)
}

// frozenTwin is a draft of d's shape on dev with d's frozen parts (its
// embeddings and head, its RoPE factors and vocabulary map) and no
// parameters yet.
func (d *Draft) frozenTwin(dev device.Device) *Draft {
	return &Draft{Dev: dev, C: d.C, Embd: d.Embd, Head: d.Head, embdT: d.embdT, headT: d.headT,
		RopeFreqs: d.RopeFreqs, D2T: d.D2T}
}

// sibling is a new draft on d's device sharing d's frozen matrices, with
// zero weights; in drafting form only when d is (DropFloat).
func (d *Draft) sibling() (_ *Draft, err error) {
	defer device.Catch(&err)
	c := d.frozenTwin(d.Dev)
	c.bind(d.DraftingOnly())
	return c, nil
}

// DraftingOnly reports whether DropFloat dropped d's float32 matrices.
func (d *Draft) DraftingOnly() bool {
	for _, p := range d.Params {
		if p.W == nil {
			return true
		}
	}
	return false
}

// CopyWeights sets d's weights to src's, which must have d's shape. The
// two may live on different devices: the values then pass through the
// host. A matrix either holds only in Q8_0 (DropFloat) passes as its
// Q8_0 values.
func (d *Draft) CopyWeights(src *Draft) error {
	if src.C != d.C {
		return fmt.Errorf("draft: copy weights of shape %+v into %+v", src.C, d.C)
	}
	var tmp []float32
	for i, p := range d.Params {
		sp := src.Params[i]
		switch {
		case p.W == nil:
			tmp = src.Values(tmp, sp)
			if err := d.freeze(p, tmp); err != nil {
				return err
			}
		case sp.W != nil && src.Dev == d.Dev:
			d.Dev.Copy(p.W, sp.W)
		default:
			tmp = src.Values(tmp, sp)
			d.Dev.Upload(p.W, tmp)
		}
	}
	return nil
}

// Live is the draft that sequences draft with, replaced as a whole when a
// trainer publishes better weights. Publishing never touches weights in
// use: it makes a new version, which each sequence picks up between
// drafting rounds (Sequence.Refresh); once a version is neither the newest
// nor held by a sequence, the next publication reuses its memory (one
// spare; others are freed). Per-request adaptation publishes every round,
// and would otherwise allocate a whole draft on the device each time.
// Safe for concurrent use: one publisher, any number of sequences.
type Live struct {
	mu     sync.Mutex
	cur    atomic.Pointer[liveVersion]
	spare  *Draft // a released version's draft, for the next Publish
	closed bool
}

// liveVersion is one published set of weights and who holds it.
type liveVersion struct {
	d    *Draft
	n    int
	refs int // sequences holding it, plus 1 while it is the newest
}

// NewLive makes d version n of a live draft; the Live owns it from now on.
// Freeze d for drafting first (Draft.FreezeForDrafting), as Publish does
// its versions.
func NewLive(d *Draft, n int) *Live {
	l := &Live{}
	l.cur.Store(&liveVersion{d: d, n: n, refs: 1})
	return l
}

// Version is the number of the newest version.
func (l *Live) Version() int { return l.cur.Load().n }

// Device names the device the drafts run on.
func (l *Live) Device() string { return l.cur.Load().d.Dev.Name() }

// Shape is the drafts' shape.
func (l *Live) Shape() draft.Config { return l.cur.Load().d.C }

// Publish copies src's weights into a new version on the live device,
// frozen for drafting (Draft.FreezeForDrafting), and makes it the newest.
// It returns the version's number.
func (l *Live) Publish(src *Draft) (_ int, err error) {
	defer device.Catch(&err)
	l.mu.Lock()
	d := l.spare
	l.spare = nil
	l.mu.Unlock()
	if d == nil {
		// A sibling of the newest version shares its frozen matrices,
		// which a clone of src (a shadow on another device) would upload
		// again.
		d, err = l.cur.Load().d.sibling()
	}
	if err == nil {
		err = d.CopyWeights(src)
	}
	if err == nil {
		err = d.FreezeForDrafting()
	}
	if err != nil {
		if d != nil {
			d.Free()
		}
		return 0, fmt.Errorf("publish draft: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur.Load()
	v := &liveVersion{d: d, n: old.n + 1, refs: 1}
	l.cur.Store(v)
	l.release(old)
	return v.n, nil
}

// DropFloat keeps the live draft's versions in drafting form only (see
// Draft.DropFloat): the newest from now, and every one published after.
// A Snapshot then starts from their Q8_0 values. Call it before any
// sequence drafts.
func (l *Live) DropFloat() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur.Load().d.DropFloat()
	if l.spare != nil {
		l.spare.Free()
		l.spare = nil
	}
}

// Snapshot copies the newest version's weights to dev (a trainer's shadow
// starts from it) and returns the copy with its version number.
func (l *Live) Snapshot(dev device.Device) (*Draft, int, error) {
	v := l.acquire()
	defer func() {
		l.mu.Lock()
		l.release(v)
		l.mu.Unlock()
	}()
	d, err := v.d.Clone(dev)
	return d, v.n, err
}

// acquire holds the newest version.
func (l *Live) acquire() *liveVersion {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.cur.Load()
	v.refs++
	return v
}

// release drops one hold of v, keeping its draft as the spare when there
// is none; l.mu is held.
func (l *Live) release(v *liveVersion) {
	if v.refs--; v.refs > 0 {
		return
	}
	if l.spare == nil && !l.closed {
		l.spare = v.d
		return
	}
	v.d.Free()
}

// Close drops the Live's hold of the newest version and frees the spare;
// sequences still holding versions free them when they are freed.
func (l *Live) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.spare != nil {
		l.spare.Free()
		l.spare = nil
	}
	l.release(l.cur.Load())
}

// NewSequence is a sequence drafting with the newest version, which
// switches to newer ones when told to Refresh.
func (l *Live) NewSequence(ctx int) *Sequence {
	v := l.acquire()
	s := v.d.NewSequence(ctx)
	s.live, s.ver = l, v
	return s
}

// Refresh switches the sequence to the newest version of its live draft,
// if there is a newer one, and reports whether it did. The cache was
// computed by the old weights, so the sequence forgets its positions (the
// drafter runs them again) unless KeepCache is set. It must not run while
// the sequence drafts: between rounds.
func (s *Sequence) Refresh() (version int, switched bool) {
	if s.live == nil {
		return 0, false
	}
	if v := s.live.cur.Load(); v == s.ver {
		return v.n, false
	}
	v := s.live.acquire()
	s.live.mu.Lock()
	s.live.release(s.ver)
	s.live.mu.Unlock()
	s.ver, s.d = v, v.d
	s.pending.Reset()
	if !s.KeepCache {
		s.len = 0
	}
	return v.n, true
}

// Version is the version of the live draft the sequence drafts with (0
// for a sequence of a plain draft).
func (s *Sequence) Version() int {
	if s.ver == nil {
		return 0
	}
	return s.ver.n
}
