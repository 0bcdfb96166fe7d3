package runner

import (
	"dovetail/app/runner/discover"

	"errors"
	"fmt"
)

// ErrFixedFleet is a fleet that cannot load models it was not made with:
// a server of one model, loaded already (Pin).
var ErrFixedFleet = errors.New("this server runs one model only")

// Add lists a model the fleet did not have (one pulled while it serves),
// or replaces the entry of that name (a model pulled again).
func (f *Fleet) Add(e discover.Model) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.options == nil {
		return ErrFixedFleet
	}
	for i, old := range f.entries {
		if old.Name == e.Name {
			f.entries[i] = e
			return nil
		}
	}
	f.entries = append(f.entries, e)
	return nil
}

// Remove forgets the model named (one deleted): no new request finds it,
// and it unloads as soon as the requests that hold it are done.
func (f *Fleet) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.lookup(name)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoModel, name)
	}
	for i, old := range f.entries {
		if old.Name == e.Name {
			f.entries = append(f.entries[:i:i], f.entries[i+1:]...)
			break
		}
	}
	f.expireLocked(e.Name)
	return nil
}
