package server

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"time"

	"dovetail/app/runner"
)

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

func (s *Server) info() modelInfo {
	return modelInfo{ID: s.model.Name, Object: "model", Created: s.created, OwnedBy: "dovetail"}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelInfo{s.info()}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/v1/models/")
	if !s.knowsModel(name) {
		e := notFound("The model '%s' does not exist; this server runs '%s'.", name, s.model.Name)
		e.Param, e.Code = "model", "model_not_found"
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, s.info())
}

// handleHealth answers load balancers and scripts waiting for the model:
// by the time the server listens the model is loaded, so it is "ok", with
// the load.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.sched.mu.Lock()
	waiting, running := s.sched.waiting, s.sched.running
	s.sched.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "ok", "model": s.model.Name,
		"slots": len(s.workers), "slots_busy": running, "queue": waiting, "queue_max": s.cfg.Queue,
	})
}

// fingerprint names the model's configuration, so that system_fingerprint
// changes when the model does.
func fingerprint(m *runner.Model) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%+v", m.Name, m.Llama.Config)
	return fmt.Sprintf("%08x", h.Sum32())
}

func now() int64 { return time.Now().Unix() }
