package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"dovetail/app/runner/discover"
)

// Fleet is the models a server may run, by name, loaded when a request
// names one: at most MaxLoaded at a time, each unloaded once idle for its
// keep-alive (ollama's way), a model in use never. Each loaded model is a
// Runner of its own, with its own draft and adaptation.
type Fleet struct {
	entries   []discover.Model
	options   func(*Model) (Options, error)
	maxLoaded int
	keepAlive time.Duration

	mu       sync.Mutex
	cond     *sync.Cond
	loaded   map[string]*Resident // by entry name
	closed   bool
	onUnload func(*Runner)
}

// Resident is a loaded model.
type Resident struct {
	Entry  discover.Model
	Model  *Model
	Runner *Runner
	// Expires is when it unloads if unused (zero: in use, or never).
	Expires time.Time

	refs      int
	lastUsed  time.Time
	keepAlive time.Duration
	draining  bool // another model waits for its memory: no new leases
	loading   bool
	err       error
	pinned    bool
	timer     *time.Timer
}

// FleetOptions shape a Fleet.
type FleetOptions struct {
	// Options says how a model runs once opened (its settings, the flags).
	Options func(*Model) (Options, error)
	// MaxLoaded bounds the models loaded at once (≤ 0: 1).
	MaxLoaded int
	// KeepAlive is how long an idle model stays loaded (< 0: forever; 0:
	// it unloads as soon as it is idle).
	KeepAlive time.Duration
	// OnUnload is told of a runner before it closes (a server forgets
	// what it kept for it).
	OnUnload func(*Runner)
}

// NewFleet serves the models entries name. Names must be unique.
func NewFleet(entries []discover.Model, o FleetOptions) (*Fleet, error) {
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.Name] {
			return nil, fmt.Errorf("two models are named %q", e.Name)
		}
		seen[e.Name] = true
	}
	f := &Fleet{entries: entries, options: o.Options, maxLoaded: max(o.MaxLoaded, 1), keepAlive: o.KeepAlive,
		loaded: map[string]*Resident{}, onUnload: o.OnUnload}
	f.cond = sync.NewCond(&f.mu)
	return f, nil
}

// Pin adds a model loaded already, which never unloads: a server of one
// model.
func (f *Fleet) Pin(e discover.Model, m *Model, r *Runner) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, e)
	f.loaded[e.Name] = &Resident{Entry: e, Model: m, Runner: r, pinned: true, lastUsed: time.Now()}
}

// Entries lists the models by name.
func (f *Fleet) Entries() []discover.Model {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]discover.Model(nil), f.entries...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds the entry a request names: its name or path as listed,
// else the first whose name ollama would resolve to the same model
// (discover.Canonical: "s110", "s110:latest", "s110.gguf" alike), or
// (with one model) "default" or "".
func (f *Fleet) Lookup(name string) (discover.Model, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookup(name)
}

func (f *Fleet) lookup(name string) (discover.Model, bool) {
	if (name == "" || name == "default") && len(f.entries) == 1 {
		return f.entries[0], true
	}
	for _, e := range f.entries {
		if e.Name == name || e.Path != "" && e.Path == name {
			return e, true
		}
	}
	want := discover.Canonical(name)
	for _, e := range f.entries {
		if discover.Canonical(e.Name) == want {
			return e, true
		}
	}
	return discover.Model{}, false
}

// Tagged is the name ollama's clients see for e (discover.Model.Tagged),
// or its own name where the tagged one would find another model.
func (f *Fleet) Tagged(e discover.Model) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := e.Tagged()
	if found, ok := f.lookup(t); ok && found.Name == e.Name {
		return t
	}
	return e.Name
}

// ErrNoModel is a name no entry answers to.
var ErrNoModel = errors.New("no such model")

// Lease is a model held for one request: it stays loaded until Release.
type Lease struct {
	f *Fleet
	r *Resident
}

// Runner is the leased model's runner.
func (l *Lease) Runner() *Runner { return l.r.Runner }

// Model is the leased model.
func (l *Lease) Model() *Model { return l.r.Model }

// Entry is the leased model's entry.
func (l *Lease) Entry() discover.Model { return l.r.Entry }

// Release gives the model back; keepAlive < 0 keeps the fleet's, else it
// sets how long it stays loaded once idle (a request's keep_alive).
func (l *Lease) Release(keepAlive time.Duration, override bool) {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	r := l.r
	r.refs--
	r.lastUsed = time.Now()
	if override {
		r.keepAlive = keepAlive
	}
	if r.refs == 0 {
		f.idle(r)
	}
	f.cond.Broadcast()
}

// Expire unloads the model named as soon as no request holds it (ollama's
// keep_alive 0 with nothing to generate): a model that is not loaded stays
// so, and no other model is touched. A pinned model stays loaded.
func (f *Fleet) Expire(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.lookup(name)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoModel, name)
	}
	f.expireLocked(e.Name)
	return nil
}

// expireLocked gives the loaded model name a keep-alive of zero: it
// unloads now, or when its last request ends; a pinned one stays. f.mu is
// held.
func (f *Fleet) expireLocked(name string) {
	r := f.loaded[name]
	if r == nil || r.pinned || r.err != nil {
		return
	}
	r.keepAlive = 0
	if r.refs == 0 && !r.loading {
		f.unload(r)
		f.cond.Broadcast()
	}
}

// idle starts an idle model's keep-alive, or unloads it at once when
// another waits for its room or its keep-alive is zero; f.mu is held.
func (f *Fleet) idle(r *Resident) {
	if r.pinned {
		return
	}
	if r.draining || r.keepAlive == 0 {
		f.unload(r)
		return
	}
	if r.keepAlive < 0 {
		r.Expires = time.Time{}
		return
	}
	r.Expires = time.Now().Add(r.keepAlive)
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timer = time.AfterFunc(r.keepAlive, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if cur := f.loaded[r.Entry.Name]; cur == r && r.refs == 0 && !time.Now().Before(r.Expires) {
			f.unload(r)
			f.cond.Broadcast()
		}
	})
}

// unload closes a resident; f.mu is held.
func (f *Fleet) unload(r *Resident) {
	if r.timer != nil {
		r.timer.Stop()
	}
	delete(f.loaded, r.Entry.Name)
	if f.onUnload != nil {
		f.onUnload(r.Runner)
	}
	r.Runner.Close()
	r.Model.Close()
}

// Acquire leases the model named, loading it if need be: when MaxLoaded
// are loaded already, idle ones are unloaded first (the least recently
// used), and busy ones finish their requests while new ones wait. ctx
// ends the wait.
func (f *Fleet) Acquire(ctx context.Context, name string) (*Lease, error) {
	e, ok := f.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoModel, name)
	}
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		switch {
		case f.closed:
			return nil, errors.New("the server is shutting down")
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		if r := f.loaded[e.Name]; r != nil {
			switch {
			case r.loading || r.draining:
			case r.err != nil:
				delete(f.loaded, e.Name)
				return nil, r.err
			default:
				r.refs++
				r.Expires = time.Time{}
				return &Lease{f: f, r: r}, nil
			}
		} else if f.makeRoom() {
			r := &Resident{Entry: e, loading: true, keepAlive: f.keepAlive}
			f.loaded[e.Name] = r
			f.mu.Unlock()
			err := f.load(r)
			f.mu.Lock()
			r.loading, r.err = false, err
			f.cond.Broadcast()
			continue
		}
		f.cond.Wait()
	}
}

// makeRoom reports whether one more model may load, unloading idle ones
// (least recently used first) and draining busy ones as needed; f.mu is
// held.
func (f *Fleet) makeRoom() bool {
	if len(f.loaded) < f.maxLoaded {
		return true
	}
	var idle, busy []*Resident
	for _, r := range f.loaded {
		switch {
		case r.pinned || r.loading:
		case r.refs == 0:
			idle = append(idle, r)
		default:
			busy = append(busy, r)
		}
	}
	if len(idle) > 0 {
		sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Before(idle[j].lastUsed) })
		f.unload(idle[0])
		return len(f.loaded) < f.maxLoaded
	}
	for _, r := range busy {
		r.draining = true
	}
	return false
}

// load opens and places a model, outside f.mu.
func (f *Fleet) load(r *Resident) error {
	m, err := OpenModel(r.Entry.Path)
	if err != nil {
		return err
	}
	o, err := f.options(m)
	if err == nil {
		var run *Runner
		if run, err = New(m, o); err == nil {
			r.Model, r.Runner, r.lastUsed = m, run, time.Now()
			return nil
		}
	}
	m.Close()
	return fmt.Errorf("loading %s: %w", r.Entry.Name, err)
}

// Loaded lists the loaded models.
func (f *Fleet) Loaded() []*Resident {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Resident
	for _, r := range f.loaded {
		if !r.loading && r.err == nil {
			c := *r
			out = append(out, &c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entry.Name < out[j].Entry.Name })
	return out
}

// Close unloads every model once its requests are done.
func (f *Fleet) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.cond.Broadcast()
	for {
		busy := false
		for _, r := range f.loaded {
			if r.refs > 0 || r.loading {
				busy = true
			} else if !r.pinned {
				f.unload(r)
			}
		}
		if !busy {
			break
		}
		f.cond.Wait()
	}
}
