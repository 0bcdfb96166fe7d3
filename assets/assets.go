// Package assets embeds what the binary ships with: the default model.
package assets

import _ "embed"

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
