package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// positionOf returns the 1-based line and column of the first occurrence
// of needle in text.
func positionOf(t *testing.T, text, needle string) (int, int) {
	t.Helper()
	i := strings.Index(text, needle)
	if i < 0 {
		t.Fatalf("%q not in text", needle)
	}
	line := strings.Count(text[:i], "\n") + 1
	col := i - strings.LastIndex(text[:i], "\n")
	return line, col
}

// TestPlanErrors sends every kind of bad plan request and checks the
// status, the error code and what the message or positions say.
func TestPlanErrors(t *testing.T) {
	ts := startServer(t, Options{MaxBodyBytes: 64 << 10, MaxPDDLBytes: 4 << 10, MaxGroundActions: 1000,
		MaxSeconds: 30, MaxSimulations: 500, MaxActions: 50, MaxTokens: 1000})
	small := startServer(t, Options{MaxGroundActions: 10})

	badDomain := strings.Replace(bwDomain, "(:action put-down", "(:action put-down :bogus", 1)
	badLine, badCol := positionOf(t, badDomain, ":bogus")
	undeclared := strings.Replace(bwProblem, "(on b c)", "(under b c)", 1)
	undLine, _ := positionOf(t, undeclared, "(under b c)")

	plan := func(fields map[string]any) map[string]any {
		req := map[string]any{"domain": bwDomain, "problem": bwProblem, "method": "cgreedy"}
		for k, v := range fields {
			if v == nil {
				delete(req, k)
			} else {
				req[k] = v
			}
		}
		return req
	}
	tests := []struct {
		name   string
		ts     *testServer
		body   any
		status int
		code   string
		check  func(t *testing.T, e apiError)
	}{
		{"malformed JSON", ts, `{"domain": "x",`, 400, CodeBadRequest, nil},
		{"not an object", ts, `[1,2]`, 400, CodeBadRequest, nil},
		{"empty body", ts, ``, 400, CodeBadRequest, nil},
		{"two values", ts, `{} {}`, 400, CodeBadRequest, nil},
		{"unknown field", ts, `{"domian": "x"}`, 400, CodeBadRequest, func(t *testing.T, e apiError) {
			if !strings.Contains(e.Message, "domian") {
				t.Errorf("message does not name the field: %s", e.Message)
			}
		}},
		{"wrong type", ts, `{"seconds": "ten"}`, 400, CodeBadRequest, func(t *testing.T, e apiError) {
			if !strings.Contains(e.Message, "seconds") {
				t.Errorf("message does not name the field: %s", e.Message)
			}
		}},
		{"no task", ts, map[string]any{"method": "cgreedy"}, 400, CodeBadRequest, nil},
		{"domain without problem", ts, plan(map[string]any{"problem": nil}), 400, CodeBadRequest, nil},
		{"pddl and env", ts, plan(map[string]any{"env": "blocksworld", "task": "instance-1"}), 400, CodeBadRequest, nil},
		{"unknown method", ts, plan(map[string]any{"method": "beam"}), 400, CodeBadRequest, func(t *testing.T, e apiError) {
			if !strings.Contains(e.Message, "cmcts") {
				t.Errorf("message does not list the methods: %s", e.Message)
			}
		}},
		{"negative budget", ts, plan(map[string]any{"seconds": -1}), 400, CodeBadRequest, nil},
		{"seconds over cap", ts, plan(map[string]any{"seconds": 31}), 400, CodeOverCap, func(t *testing.T, e apiError) {
			if !strings.Contains(e.Message, "30") {
				t.Errorf("message does not name the cap: %s", e.Message)
			}
		}},
		{"simulations over cap", ts, plan(map[string]any{"simulations": 501}), 400, CodeOverCap, nil},
		{"actions over cap", ts, plan(map[string]any{"max_actions": 51}), 400, CodeOverCap, nil},
		{"tokens over cap", ts, plan(map[string]any{"max_tokens": 1001}), 400, CodeOverCap, nil},
		{"bad sampling", ts, plan(map[string]any{"sampling": map[string]any{"top_p": 2}}), 400, CodeBadRequest, nil},
		{"negative rollout temperature", ts, plan(map[string]any{"search": map[string]any{"rollout": 5, "rollout_temperature": -1}}), 400, CodeBadRequest, nil},
		{"bad backup", ts, plan(map[string]any{"search": map[string]any{"backup": "min"}}), 400, CodeBadRequest, nil},
		{"bad heuristic", ts, plan(map[string]any{"heuristic": "hplus"}), 400, CodeBadRequest, nil},
		{"body too large", ts, plan(map[string]any{"domain": bwDomain + ";" + strings.Repeat("x", 70<<10)}), 413, CodeBodyTooLarge, nil},
		{"pddl too large", ts, plan(map[string]any{"domain": bwDomain + ";" + strings.Repeat("x", 5<<10)}), 413, CodePDDLTooLarge, nil},
		{"bad domain syntax", ts, plan(map[string]any{"domain": badDomain}), 422, CodeBadPDDL, func(t *testing.T, e apiError) {
			if len(e.Positions) == 0 {
				t.Fatalf("no positions: %+v", e)
			}
			p := e.Positions[0]
			if p.File != "domain.pddl" || p.Line != badLine || p.Col < badCol-20 || p.Col > badCol+10 {
				t.Errorf("position %+v, want domain.pddl line %d near col %d", p, badLine, badCol)
			}
			if !strings.Contains(e.Message, "domain.pddl:"+strconv.Itoa(badLine)) {
				t.Errorf("message lacks file:line: %s", e.Message)
			}
		}},
		{"undeclared predicate", ts, plan(map[string]any{"problem": undeclared}), 422, CodeBadPDDL, func(t *testing.T, e apiError) {
			if len(e.Positions) == 0 || e.Positions[0].File != "problem.pddl" || e.Positions[0].Line != undLine {
				t.Errorf("positions %+v, want problem.pddl line %d", e.Positions, undLine)
			}
		}},
		{"unclosed problem", ts, plan(map[string]any{"problem": strings.TrimRight(bwProblem, ")\n")}), 422, CodeBadPDDL, func(t *testing.T, e apiError) {
			if len(e.Positions) == 0 || e.Positions[0].File != "problem.pddl" {
				t.Errorf("positions %+v", e.Positions)
			}
		}},
		{"unsolvable", ts, plan(map[string]any{"domain": bwUnsolvableDomain, "problem": bwUnsolvableProblem}), 422, CodeUnsolvable, func(t *testing.T, e apiError) {
			if !strings.Contains(e.Message, "l2") {
				t.Errorf("message does not say which goal fails: %s", e.Message)
			}
		}},
		{"too many actions", small, plan(nil), 422, CodeTooManyActions, func(t *testing.T, e apiError) {
			if !strings.Contains(e.Message, "10") {
				t.Errorf("message does not name the limit: %s", e.Message)
			}
		}},
		{"bad lexicon", ts, plan(map[string]any{"lexicon": map[string]any{"actions": map[string]string{"fly": "fly {x}"}}}), 422, CodeBadLexicon, nil},
		{"malformed lexicon", ts, plan(map[string]any{"lexicon": map[string]any{"verbs": map[string]string{}}}), 422, CodeBadLexicon, nil},
		{"unknown model", ts, plan(map[string]any{"model": "qwen9:900b"}), 404, CodeModelNotFound, func(t *testing.T, e apiError) {
			if !strings.Contains(e.Message, "qwen9:900b") {
				t.Errorf("message does not name the model: %s", e.Message)
			}
		}},
		{"unknown env", ts, map[string]any{"env": "minecraft", "task": "1"}, 404, CodeUnknownEnv, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := tt.ts.do("POST", "/v1/plan", tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			e := apiErr(t, body)
			if e.Code != tt.code {
				t.Fatalf("code %q, want %q: %s", e.Code, tt.code, e.Message)
			}
			if tt.check != nil {
				tt.check(t, e)
			}
		})
	}
	// The server is still healthy after all of that.
	if status, _, body := ts.do("GET", "/healthz", nil); status != 200 {
		t.Errorf("healthz %d: %s", status, body)
	}
}

// TestAuth checks the bearer token on every route but /healthz.
func TestAuth(t *testing.T) {
	ts := startServer(t, Options{Token: "s3cret"})
	for _, tt := range []struct {
		path, auth string
		status     int
	}{
		{"/v1/models", "", 401},
		{"/v1/models", "Bearer wrong", 401},
		{"/v1/models", "s3cret", 401},
		{"/v1/models", "Bearer s3cret", 200},
		{"/v1/models", "bearer s3cret", 200}, // the scheme is case-insensitive
		{"/v1/models", "BEARER s3cret", 200},
		{"/v1/models", "bearer wrong", 401},
		{"/api/tags", "", 401},
		{"/metrics", "", 401},
		{"/metrics", "Bearer s3cret", 200},
		{"/healthz", "", 200},
	} {
		t.Run(tt.path+" "+tt.auth, func(t *testing.T) {
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			status, h, body := ts.do("GET", tt.path, nil, hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if tt.path == "/healthz" {
				// Without the token: the status alone, no version or hardware.
				var h map[string]any
				mustJSON(t, body, &h)
				if len(h) != 1 || h["status"] != "ok" {
					t.Errorf("healthz without the token says %s", body)
				}
			}
			if status == 401 {
				wantCode(t, body, CodeUnauthorized)
				if h.Get("WWW-Authenticate") == "" {
					t.Error("no WWW-Authenticate header")
				}
			}
		})
	}
}

// TestPanicRecovered checks that a panicking handler answers 500 through
// the server's middleware, is counted, and the server goes on serving.
func TestPanicRecovered(t *testing.T) {
	ts := startServer(t, Options{})
	h := ts.s.instrument(http.NewServeMux(), func(w http.ResponseWriter, r *http.Request) {
		var m map[string]int
		m["boom"]++ // nil map write: a real runtime panic
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != 500 {
		t.Fatalf("status %d", rec.Code)
	}
	var e apiError
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != CodeInternal {
		t.Errorf("body %s", rec.Body.String())
	}
	if v := ts.metric("nesy_http_panics_total"); v != 1 {
		t.Errorf("panics metric %v", v)
	}
	if status, _, _ := ts.do("GET", "/healthz", nil); status != 200 {
		t.Errorf("healthz after panic: %d", status)
	}
}
