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

func (s *Server) info(name string) modelInfo {
	return modelInfo{ID: name, Object: "model", Created: s.created, OwnedBy: "dovetail"}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	list := modelList{Object: "list", Data: []modelInfo{}}
	for _, e := range s.fleet.Entries() {
		list.Data = append(list.Data, s.info(e.Name))
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/v1/models/")
	e, ok := s.fleet.Lookup(name)
	if !ok || name == "" {
		writeError(w, s.unknownModel(name))
		return
	}
	writeJSON(w, http.StatusOK, s.info(e.Name))
}

// handleHealth answers load balancers and scripts waiting for the model:
// by the time the server listens the model is loaded, so it is "ok", with
// the load.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	var names []string
	for _, e := range s.fleet.Entries() {
		names = append(names, e.Name)
	}
	var loaded []string
	slots := 0
	for _, res := range s.fleet.Loaded() {
		loaded, slots = append(loaded, res.Entry.Name), slots+res.Runner.Slots()
	}
	s.mu.Lock()
	var waiting, running int
	for _, q := range s.queued {
		waiting, running = waiting+q[0], running+q[1]
	}
	s.mu.Unlock()
	h := map[string]any{"status": "ok", "models": names, "loaded": loaded,
		"slots": slots, "slots_busy": running, "queue": waiting, "queue_max": s.cfg.Queue}
	if len(names) == 1 {
		h["model"] = names[0]
	}
	writeJSON(w, http.StatusOK, h)
}

// fingerprint names the model's configuration, so that system_fingerprint
// changes when the model does.
func systemFingerprint(m *runner.Model) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%+v", m.Name, m.Llama.Config)
	return fmt.Sprintf("fp_dovetail_%08x", h.Sum32())
}

func now() int64 { return time.Now().Unix() }
