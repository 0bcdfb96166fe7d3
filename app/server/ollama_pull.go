package server

import (
	"cmp"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"

	"dovetail/app/runner/discover"
	"dovetail/app/runner/pull"
)

// ollama's model store endpoints: /api/pull downloads a model into the
// models folder (Config.Pulls) and lists it at once; /api/delete and
// /api/copy touch pulled models only, never a file Dovetail did not
// download.

// pullRequest is ollama's PullRequest; username and password are
// deprecated there and ignored, as there.
type pullRequest struct {
	Model    string `json:"model"`
	Name     string `json:"name"` // the older field
	Insecure bool   `json:"insecure"`
	Stream   *bool  `json:"stream"`
}

// progress is ollama's ProgressResponse.
type progress struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

func (s *Server) handlePull(w http.ResponseWriter, r *http.Request) {
	var req pullRequest
	if e := decodeBody(r, &req); e != nil {
		ollamaError(w, e)
		return
	}
	name := cmp.Or(req.Model, req.Name)
	if name == "" {
		ollamaError(w, invalid("model", "", "model is required"))
		return
	}
	if _, err := pull.Parse(name); err != nil {
		ollamaError(w, invalid("model", "", "%v", err))
		return
	}
	o := s.cfg.Pulls
	o.Insecure = o.Insecure || req.Insecure
	if req.Stream != nil && !*req.Stream {
		if _, e := s.pull(r, name, o); e != nil {
			ollamaError(w, e)
			return
		}
		writeJSON(w, http.StatusOK, progress{Status: "success"})
		return
	}
	s.streamPull(w, r, name, o)
}

// streamPull sends each progress object as ollama does, and "success"
// only once the model is listed: a client that asks /api/tags on
// "success" finds it there.
func (s *Server) streamPull(w http.ResponseWriter, r *http.Request, name string, o pull.Options) {
	nd := startNDJSON(w)
	var mu sync.Mutex
	o.Progress = func(p pull.Progress) {
		if p.Status == "success" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		nd.send(progressOf(p))
	}
	_, e := s.pull(r, name, o)
	mu.Lock()
	defer mu.Unlock()
	if e != nil {
		nd.send(map[string]string{"error": e.Message})
		return
	}
	nd.send(progress{Status: "success"})
}

// progressOf is a step as ollama sends it: only a blob's download names
// its digest and counts its bytes.
func progressOf(p pull.Progress) progress {
	if !strings.HasPrefix(p.Status, "pulling ") || p.Digest == "" {
		return progress{Status: p.Status}
	}
	return progress{Status: p.Status, Digest: p.Digest, Total: p.Total, Completed: p.Completed}
}

// pull downloads the model named and lists it.
func (s *Server) pull(r *http.Request, name string, o pull.Options) (pull.Model, *apiError) {
	m, err := pull.Pull(r.Context(), name, o)
	if err != nil {
		if errors.Is(err, pull.ErrNotFound) {
			return m, notFound("%v", err)
		}
		return m, serverError(err)
	}
	if m.Draft != nil {
		return m, nil // an EAGLE draft is no model to serve: --draft eagle: reads it
	}
	// A server of one model keeps it for the next start (serve --models):
	// ErrFixedFleet is no failure of the pull.
	s.fleet.Add(discover.Pulled(m))
	return m, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"` // the older field
	}
	if e := decodeBody(r, &req); e != nil {
		ollamaError(w, e)
		return
	}
	name := cmp.Or(req.Model, req.Name)
	if name == "" {
		ollamaError(w, invalid("model", "", "model is required"))
		return
	}
	m, e := s.findPulled(name)
	if e != nil {
		ollamaError(w, e)
		return
	}
	if s.runs(m) {
		e := invalid("model", "", "model '%s' is the one this server runs (serve -m): stop the server to delete it", name)
		e.Status = http.StatusConflict
		ollamaError(w, e)
		return
	}
	// Unloaded first: no request starts on a model going away.
	s.fleet.Remove(m.Name)
	if err := pull.Remove(s.cfg.Pulls.Dir, m.Name); err != nil {
		ollamaError(w, serverError(err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// runs reports a server of one model (Config.Runner) running m, which it
// cannot unload.
func (s *Server) runs(m pull.Model) bool {
	if s.cfg.Runner == nil {
		return false
	}
	a, err1 := os.Stat(s.cfg.Runner.Model().Path)
	b, err2 := os.Stat(m.Path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// findPulled is the pulled model named; another program's model, or a
// file, is not found: Dovetail deletes and copies only what it pulled.
func (s *Server) findPulled(name string) (pull.Model, *apiError) {
	m, ok, err := pull.Find(s.cfg.Pulls.Dir, name) // "" is the user's models folder
	switch {
	case err != nil:
		return m, serverError(err)
	case ok:
		return m, nil
	}
	if e, ok := s.fleet.Lookup(name); ok {
		return m, notFound("model '%s' was not pulled by Dovetail (it is %s): Dovetail deletes and copies only the models it pulled", name, sourceOf(e))
	}
	return m, notFound("model '%s' not found", name)
}

// sourceOf says where a model Dovetail did not pull comes from.
func sourceOf(e discover.Model) string {
	switch e.Source {
	case "ollama":
		return "ollama's, " + e.Path
	case "lmstudio":
		return "LM Studio's, " + e.Path
	case "embedded":
		return "the embedded model"
	}
	if e.Path == "" {
		return "the embedded model"
	}
	return "the file " + e.Path
}

func (s *Server) handleCopy(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	if e := decodeBody(r, &req); e != nil {
		ollamaError(w, e)
		return
	}
	switch {
	case req.Source == "":
		ollamaError(w, invalid("source", "", "source is required"))
		return
	case req.Destination == "":
		ollamaError(w, invalid("destination", "", "destination is required"))
		return
	}
	if _, err := pull.Parse(req.Destination); err != nil {
		ollamaError(w, invalid("destination", "", "destination %q is invalid: %v", req.Destination, err))
		return
	}
	src, e := s.findPulled(req.Source)
	if e != nil {
		ollamaError(w, e)
		return
	}
	dir := s.cfg.Pulls.Dir
	if err := pull.Copy(dir, src.Name, req.Destination); err != nil {
		ollamaError(w, serverError(err))
		return
	}
	if m, ok, err := pull.Find(dir, req.Destination); err == nil && ok {
		s.fleet.Add(discover.Pulled(m))
	}
	w.WriteHeader(http.StatusOK)
}
