package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"dovetail/app/runner/discover"
	"dovetail/internal/golden"
)

// A model added while the fleet serves is found and loads; removed, it is
// found no more and unloads once its request is done.
func TestFleetAddRemove(t *testing.T) {
	o := options(t)
	o.Draft = DraftChoice{Kind: DraftNone}
	f, err := NewFleet(nil, FleetOptions{Options: func(*Model) (Options, error) { return o, nil }, KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.Lookup("tiny:1b"); ok {
		t.Fatal("an empty fleet found a model")
	}
	if err := f.Add(discover.Model{Name: "tiny:1b", Path: golden.ModelPath("stories260K-f32.gguf"), Source: "pulled"}); err != nil {
		t.Fatal(err)
	}
	l, err := f.Acquire(context.Background(), "tiny:1b")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("tiny:1b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup("tiny:1b"); ok {
		t.Error("a removed model is still found")
	}
	if len(f.Loaded()) != 1 {
		t.Error("a model in use unloaded when it was removed")
	}
	l.Release(-1, false)
	if len(f.Loaded()) != 0 {
		t.Error("a removed model stayed loaded once idle")
	}
	if err := f.Remove("tiny:1b"); !errors.Is(err, ErrNoModel) {
		t.Errorf("removing it again: %v", err)
	}
}

// A server of one loaded model cannot take another.
func TestFleetPinnedIsFixed(t *testing.T) {
	f, err := NewFleet(nil, FleetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Add(discover.Model{Name: "a", Path: "/a.gguf"}); !errors.Is(err, ErrFixedFleet) {
		t.Errorf("add: %v", err)
	}
}
