package server

import (
	"strings"
	"testing"
)

// TestUIRoutes: the page and its assets are served from the binary (and
// need no token: they hold no data), the task list does need one.
func TestUIRoutes(t *testing.T) {
	ts := startServer(t, Options{Token: "secret"})
	auth := []string{"Authorization", "Bearer secret"}
	tests := []struct {
		path   string
		header []string
		status int
		ctype  string
		want   string
	}{
		{"/ui", nil, 200, "text/html", `src="/ui/app.js"`},
		{"/ui/app.js", nil, 200, "text/javascript", "nesyUI"},
		{"/ui/style.css", nil, 200, "text/css", "#tree"},
		{"/ui/tasks.json", nil, 401, "application/json", CodeUnauthorized},
		{"/ui/tasks.json", auth, 200, "application/json", "(define (domain blocks)"},
		{"/ui/missing.js", auth, 404, "application/json", CodeNotFound},
	}
	for _, tt := range tests {
		status, h, body := ts.do("GET", tt.path, nil, tt.header...)
		if status != tt.status || !strings.HasPrefix(h.Get("Content-Type"), tt.ctype) || !strings.Contains(string(body), tt.want) {
			t.Errorf("GET %s: %d %q, want %d %q containing %q", tt.path, status, h.Get("Content-Type"), tt.status, tt.ctype, tt.want)
		}
	}
}
