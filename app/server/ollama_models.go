package server

import (
	"fmt"
	"net/http"
	"time"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
)

// ollama's model endpoints: /api/tags, /api/show, /api/ps, /api/version.

// ollamaDetails is ollama's ModelDetails.
type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func detailsOf(d runner.Description) ollamaDetails {
	return ollamaDetails{Format: "gguf", Family: d.Arch, Families: []string{d.Arch}, ParameterSize: runner.ParamSize(d.Params),
		QuantizationLevel: d.Quantization}
}

type ollamaModel struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt time.Time     `json:"modified_at"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    ollamaDetails `json:"details"`
}

// describe reads an entry's header; a file that does not read is left out
// of lists (and fails when a request names it).
func describe(e discover.Model) (runner.Description, bool) {
	d, err := runner.Describe(e.Path)
	if err != nil {
		return d, false
	}
	if e.Size > 0 {
		d.Size = e.Size
	}
	return d, true
}

func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Models []ollamaModel `json:"models"`
	}{Models: []ollamaModel{}}
	for _, e := range s.fleet.Entries() {
		if d, ok := describe(e); ok {
			name := s.fleet.Tagged(e)
			out.Models = append(out.Models, ollamaModel{Name: name, Model: name, ModifiedAt: d.Modified, Size: d.Size,
				Digest: d.Fingerprint, Details: detailsOf(d)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"` // the older field
	}
	if e := decodeBody(r, &req); e != nil {
		ollamaError(w, e)
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	e, ok := s.fleet.Lookup(req.Model)
	if !ok {
		ollamaError(w, s.unknownModel(req.Model))
		return
	}
	d, ok := describe(e)
	if !ok {
		ollamaError(w, serverError(fmt.Errorf("the model %s cannot be read", e.Name)))
		return
	}
	info := map[string]any{"general.architecture": d.Arch, "general.parameter_count": d.Params, "general.name": d.Name,
		d.Arch + ".context_length": d.ContextLength, d.Arch + ".embedding_length": d.Hidden, d.Arch + ".block_count": d.Layers,
		d.Arch + ".attention.head_count": d.Heads, d.Arch + ".attention.head_count_kv": d.KVHeads,
		d.Arch + ".feed_forward_length": d.FFN, d.Arch + ".vocab_size": d.Vocab}
	from := e.Path
	if from == "" {
		from = "(the embedded model)"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"license": d.License, "modelfile": "FROM " + from + "\n", "template": d.ChatTemplate,
		"parameters": fmt.Sprintf("num_ctx %d", d.ContextLength), "details": detailsOf(d), "model_info": info,
		"capabilities": []string{"completion"}, "modified_at": d.Modified})
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
}

func (s *Server) handlePS(w http.ResponseWriter, r *http.Request) {
	type running struct {
		ollamaModel
		ExpiresAt     time.Time `json:"expires_at"`
		SizeVRAM      uint64    `json:"size_vram"`
		ContextLength int       `json:"context_length"`
	}
	out := struct {
		Models []running `json:"models"`
	}{Models: []running{}}
	for _, res := range s.fleet.Loaded() {
		d, _ := describe(res.Entry)
		b := res.Runner.Budget()
		expires := res.Expires
		if expires.IsZero() {
			expires = time.Now().Add(24 * time.Hour * 365)
		}
		name := s.fleet.Tagged(res.Entry)
		out.Models = append(out.Models, running{ollamaModel: ollamaModel{Name: name, Model: name,
			ModifiedAt: d.Modified, Size: int64(b.CPU() + b.GPU()), Digest: d.Fingerprint, Details: detailsOf(d)},
			ExpiresAt: expires, SizeVRAM: b.GPU(), ContextLength: res.Runner.Context()})
	}
	writeJSON(w, http.StatusOK, out)
}
