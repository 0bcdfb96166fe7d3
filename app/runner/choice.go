package runner

import (
	"fmt"
	"strconv"
	"strings"
)

// DraftChoice is which drafter a runner drafts with: --draft's value,
// parsed once (ParseDraft) where a front end reads it.
type DraftChoice struct {
	Kind DraftKind
	Path string // the file of DraftModel and DraftDGF
}

// DraftKind is a kind of drafter.
type DraftKind int

const (
	// DraftAuto is the target's saved or shipped DGF draft; with
	// background adaptation a new one when it has none.
	DraftAuto DraftKind = iota
	DraftNone
	DraftNgram   // prompt lookup
	DraftModel   // a smaller model of the same vocabulary
	DraftDGF     // a Dovetail draft file
	DraftScratch // a new DGF draft that learns from nothing
	DraftEAGLE   // a published EAGLE-1/2 or EAGLE-3 checkpoint (a directory)
)

var draftKinds = [...]string{"auto", "none", "ngram", "model", "dgf", "scratch", "eagle"}

// pathKinds are the choices that name a file or directory.
var pathKinds = map[string]DraftKind{"model": DraftModel, "dgf": DraftDGF, "eagle": DraftEAGLE, "eagle3": DraftEAGLE}

// ParseDraft reads none, ngram, model:PATH, dgf:PATH, eagle:PATH, scratch
// or auto ("" is none of them: an empty flag is a mistake, not a choice).
// eagle3:PATH is eagle:PATH: the checkpoint's config.json says which.
func ParseDraft(s string) (DraftChoice, error) {
	kind, arg, _ := strings.Cut(s, ":")
	if kind == "auto" {
		return DraftChoice{Kind: DraftAuto}, nil
	}
	if k, ok := pathKinds[kind]; ok {
		if arg == "" {
			return DraftChoice{}, fmt.Errorf("draft %q needs a path: %s:PATH", s, kind)
		}
		return DraftChoice{Kind: k, Path: arg}, nil
	}
	for k, name := range draftKinds {
		if kind == name {
			return DraftChoice{Kind: DraftKind(k)}, nil
		}
	}
	return DraftChoice{}, fmt.Errorf("draft %q: want none, ngram, model:PATH, dgf:PATH, eagle:PATH, scratch or auto", s)
}

// String is the choice as --draft takes it.
func (d DraftChoice) String() string {
	if d.Kind == DraftModel || d.Kind == DraftDGF || d.Kind == DraftEAGLE {
		return draftKinds[d.Kind] + ":" + d.Path
	}
	return draftKinds[d.Kind]
}

// DeviceChoice is where a DGF draft runs and trains: --device's value,
// parsed once (ParseDevice).
type DeviceChoice struct {
	Kind    DeviceKind
	Ordinal int // the GPU of DeviceCUDA
}

// DeviceKind is a kind of device.
type DeviceKind int

const (
	DeviceAuto DeviceKind = iota // a GPU when there is one and it pays
	DeviceCPU
	DeviceCUDA
)

// ParseDevice reads auto, cpu or cuda[:N] ("" is none of them).
func ParseDevice(spec string) (DeviceChoice, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch kind {
	case "auto":
		if hasArg {
			return DeviceChoice{}, fmt.Errorf("device %q: auto takes no number", spec)
		}
		return DeviceChoice{Kind: DeviceAuto}, nil
	case "cpu":
		if hasArg {
			return DeviceChoice{}, fmt.Errorf("device %q: cpu takes no number", spec)
		}
		return DeviceChoice{Kind: DeviceCPU}, nil
	case "cuda":
		d := DeviceChoice{Kind: DeviceCUDA}
		if hasArg {
			var err error
			if d.Ordinal, err = strconv.Atoi(arg); err != nil || d.Ordinal < 0 {
				return DeviceChoice{}, fmt.Errorf("device %q: %q is not a GPU number", spec, arg)
			}
		}
		return d, nil
	}
	return DeviceChoice{}, fmt.Errorf("device %q: want auto, cpu or cuda[:N]", spec)
}

// String is the choice as --device takes it.
func (d DeviceChoice) String() string {
	switch d.Kind {
	case DeviceCPU:
		return "cpu"
	case DeviceCUDA:
		return "cuda:" + strconv.Itoa(d.Ordinal)
	}
	return "auto"
}
