package server

import (
	"encoding/json"
	"net/http"
	"sync"
)

// ndjson writes a stream of JSON values, one per line, flushing each
// (application/x-ndjson, as Ollama streams). Safe for concurrent senders.
type ndjson struct {
	mu      sync.Mutex // serializes writes
	w       http.ResponseWriter
	rc      *http.ResponseController
	enc     *json.Encoder
	started bool
	failed  bool // a write failed: the client is gone
}

func newNDJSON(w http.ResponseWriter) *ndjson {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &ndjson{w: w, rc: http.NewResponseController(w), enc: enc}
}

// send writes v as one line; errors (a gone client) are remembered and make
// later sends no-ops: the request context tells the work to stop.
func (s *ndjson) send(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/x-ndjson")
		s.w.Header().Set("Cache-Control", "no-cache")
		s.w.Header().Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	if err := s.enc.Encode(v); err != nil {
		s.failed = true
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}
