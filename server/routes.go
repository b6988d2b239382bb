package server

import (
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3 description of the server's API (served at
// /openapi.json).
func OpenAPI() []byte { return openAPI }

// routes builds the handler: the mux wrapped in metrics, recovery and auth.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, h) }
	handle("POST /v1/plan", s.handlePlan)
	handle("GET /v1/models", s.handleModels)
	handle("POST /v1/chat/completions", s.handleChatCompletions)
	handle("POST /v1/completions", s.handleCompletions)
	s.registerUI(handle)
	handle("GET /healthz", s.handleHealth)
	handle("GET /metrics", s.promHandler().ServeHTTP)
	handle("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	})
	handle("GET /api/version", s.handleVersion)
	handle("GET /api/tags", s.handleTags)
	handle("GET /api/ps", s.handlePs)
	handle("POST /api/show", s.handleShow)
	handle("POST /api/generate", s.handleGenerate)
	handle("POST /api/chat", s.handleChat)
	handle("GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "nesy is running\n") })

	return s.instrument(mux, func(w http.ResponseWriter, r *http.Request) {
		// Requests the mux has no pattern for: a JSON 404 or 405.
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			r2.Method = m
			if _, p := mux.Handler(r2); p != "" {
				w.Header().Set("Allow", m)
				writeErrorFor(r, w, errorf(http.StatusMethodNotAllowed, CodeMethod, "%s %s: method not allowed (use %s)", r.Method, r.URL.Path, m))
				return
			}
		}
		writeErrorFor(r, w, errorf(http.StatusNotFound, CodeNotFound, "no route %s %s (see /openapi.json)", r.Method, r.URL.Path))
	})
}

// statusWriter records the status code and whether anything was written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush on the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument wraps the routes in, from the outside: metrics and logging,
// panic recovery, bearer-token auth and the body size limit.
func (s *Server) instrument(mux *http.ServeMux, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		route := "other"
		if _, p := mux.Handler(r); p != "" {
			route = p[strings.IndexByte(p, ' ')+1:]
			if route == "/{$}" {
				route = "/"
			}
		}
		method := r.Method
		if method != http.MethodGet && method != http.MethodPost && method != http.MethodHead {
			method = "other"
		}
		sw := &statusWriter{ResponseWriter: w}
		s.m.inFlight.Inc()
		defer func() {
			s.m.inFlight.Dec()
			p := recover()
			if p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.m.panics.Inc()
				s.log.Error("panic in handler", "route", route, "panic", p, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeErrorFor(r, sw, errorf(http.StatusInternalServerError, CodeInternal, "internal error: %v", p))
				}
			}
			code := strconv.Itoa(sw.status)
			if sw.status == 0 {
				code = "200"
			}
			d := time.Since(start)
			s.m.requests.WithLabelValues(route, method, code).Inc()
			s.m.latency.WithLabelValues(route, method, code).Observe(d.Seconds())
			if route != "/metrics" && route != "/healthz" {
				s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", code, "seconds", d.Seconds())
			}
		}()
		if s.opts.Token != "" && route != "/healthz" && !isPublicRoute(route) && !s.authorized(r) {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="nesy"`)
			writeErrorFor(r, sw, errorf(http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token"))
			return
		}
		bodyDeadline(sw, r, s.opts.BodyTimeout)
		if r.Body != nil {
			r.Body = http.MaxBytesReader(sw, r.Body, s.opts.MaxBodyBytes)
		}
		h(sw, r)
	})
}

// authorized reports whether r carries the server's token. The scheme name
// is case-insensitive (RFC 9110, section 11.1): "bearer" is "Bearer".
func (s *Server) authorized(r *http.Request) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.Token)) == 1
}

// decodeJSON reads a request body into v. strict refuses unknown fields.
func decodeJSON(r *http.Request, v any, strict bool) error {
	dec := json.NewDecoder(r.Body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return err
		case errors.As(err, &ne) && ne.Timeout():
			return errorf(http.StatusRequestTimeout, CodeBodyTimeout, "the request body was not received in time")
		case errors.Is(err, io.EOF):
			return errorf(http.StatusBadRequest, CodeBadRequest, "empty request body: want a JSON object")
		case errors.As(err, &se):
			return errorf(http.StatusBadRequest, CodeBadRequest, "malformed JSON at byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return errorf(http.StatusBadRequest, CodeBadRequest, "field %q: got JSON %s, want %s", te.Field, te.Value, te.Type)
		}
		return errorf(http.StatusBadRequest, CodeBadRequest, "bad JSON: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, CodeBadRequest, "malformed JSON: more than one value in the body")
	}
	return nil
}

// healthResponse is the body of GET /healthz. On a server with a token,
// a request without it gets the status alone (no version or hardware).
type healthResponse struct {
	Status        string  `json:"status"` // "ok" or "draining"
	Version       string  `json:"version,omitempty"`
	UptimeSeconds float64 `json:"uptime_seconds,omitempty"`
	LoadedModels  int     `json:"loaded_models,omitempty"`
	Running       int     `json:"running,omitempty"`
	Queued        int     `json:"queued,omitempty"`
	System        string  `json:"system,omitempty"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := healthResponse{Status: "ok"}
	if s.opts.Token == "" || s.authorized(r) {
		running, queued := s.adm.stats()
		h = healthResponse{Status: "ok", Version: s.opts.Version, UptimeSeconds: time.Since(s.started).Seconds(),
			LoadedModels: len(s.models.engines()), Running: running, Queued: queued, System: s.system}
	}
	status := http.StatusOK
	if s.adm.isDraining() {
		h.Status, status = "draining", http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

// modelsResponse is the body of GET /v1/models: nesy's own list
// (models) and the same models in OpenAI's list shape (object "list",
// data), so both nesy's clients and OpenAI's read it.
type modelsResponse struct {
	Models []modelInfo   `json:"models"`
	Object string        `json:"object"`
	Data   []openAIModel `json:"data"`
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	list := s.models.list()
	if list == nil {
		list = []modelInfo{}
	}
	writeJSON(w, http.StatusOK, modelsResponse{Models: list, Object: "list", Data: openAIModels(list)})
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.opts.Version})
}

// errorMessage is fmt.Sprint for logs.
func errorMessage(err error) string { return fmt.Sprint(err) }
