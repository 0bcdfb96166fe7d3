// Package assets embeds what the binary ships with: the default model.
package assets

import (
	"embed"
	"fmt"
)

// DefaultModelName is the file name of the embedded default model.
const DefaultModelName = "tinystories656K-Q8_0.gguf"

// DefaultModel is TinyStories-656K quantized to Q8_0 (Apache-2.0; see
// README.md beside this file).
//
//go:embed tinystories656K-Q8_0.gguf
var DefaultModel []byte

// DefaultDraftName is the file name of the DGF draft distilled for the
// default model.
const DefaultDraftName = "tinystories656K-Q8_0.dgf.gguf"

// DefaultDraft is a Dovetail (DGF) draft for DefaultModel, made by
// `dovetail distill --self` (see README.md beside this file). `run --draft
// auto` uses it for that model.
//
//go:embed tinystories656K-Q8_0.dgf.gguf
var DefaultDraft []byte

// DefaultWorkload is the request stream `dovetail bench adapt` replays by
// default: prompts for the default model whose domain shifts halfway.
const DefaultWorkload = "tinystories-shift.workload.tsv"

//go:embed *.workload.tsv
var workloads embed.FS

// Workload returns a shipped workload file by name.
func Workload(name string) ([]byte, error) {
	b, err := workloads.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("no shipped workload %q (see assets/*.workload.tsv)", name)
	}
	return b, nil
}
