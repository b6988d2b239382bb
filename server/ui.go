package server

import (
	_ "embed"
	"net/http"
	"strings"

	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/examples"
)

// The live search view at GET /ui: a page (web/index.html, web/style.css)
// and its script (web/dist/app.js, bundled from web/src with esbuild; see
// web/package.json and `make ui`), embedded so the page works offline. It
// drives POST /v1/plan with "stream", "tree" and "trace" and lists the
// tasks it offers from GET /ui/tasks.json.

//go:embed web/index.html
var uiIndex []byte

//go:embed web/style.css
var uiStyle []byte

//go:embed web/dist/app.js
var uiScript []byte

//go:embed web/favicon.svg
var uiIcon []byte

// maxUITasks bounds the tasks listed per environment.
const maxUITasks = 1000

// uiTasks is the body of GET /ui/tasks.json.
type uiTasks struct {
	Examples []uiExample `json:"examples"`
	Envs     []uiEnv     `json:"envs"`
}

// uiExample is an example task with its PDDL text.
type uiExample struct {
	Name    string `json:"name"`
	Domain  string `json:"domain"`
	Problem string `json:"problem"`
}

// uiEnv lists an environment's task ids.
type uiEnv struct {
	Name  string   `json:"name"`
	Tasks []string `json:"tasks"`
}

// isPublicRoute says whether a route needs no token: the page and its
// static assets hold no data (the page sends the token the user types to
// the API routes).
func isPublicRoute(route string) bool {
	return route == "/ui" || route == "/ui/app.js" || route == "/ui/style.css" || route == "/ui/favicon.svg"
}

// registerUI adds the live view's routes.
func (s *Server) registerUI(handle func(string, http.HandlerFunc)) {
	static := func(body []byte, ctype string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", ctype)
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'")
			w.Write(body)
		}
	}
	handle("GET /ui", static(uiIndex, "text/html; charset=utf-8"))
	handle("GET /ui/app.js", static(uiScript, "text/javascript; charset=utf-8"))
	handle("GET /ui/style.css", static(uiStyle, "text/css; charset=utf-8"))
	handle("GET /ui/favicon.svg", static(uiIcon, "image/svg+xml"))
	handle("GET /ui/tasks.json", s.handleUITasks)
}

// handleUITasks lists the example task and, when the server has a
// datasets folder, the tasks of each environment that opens.
func (s *Server) handleUITasks(w http.ResponseWriter, r *http.Request) {
	out := uiTasks{Examples: []uiExample{{Name: "blocks (reverse a tower of three)", Domain: examples.BlocksDomain, Problem: examples.BlocksProblem}},
		Envs: []uiEnv{}}
	if s.envs.datasets != "" {
		for _, name := range envs.Names() {
			env, err := s.envs.env(name)
			if err != nil {
				s.log.Debug("ui: environment not listed", "env", name, "err", err)
				continue
			}
			e := uiEnv{Name: name, Tasks: []string{}}
			for i, t := range env.Tasks() {
				if i == maxUITasks {
					break
				}
				e.Tasks = append(e.Tasks, t.ID)
			}
			out.Envs = append(out.Envs, e)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// env opens (once) the environment called name.
func (c *envCache) env(name string) (envs.Env, error) {
	name = strings.ToLower(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if env, ok := c.envs[name]; ok {
		return env, nil
	}
	env, err := envs.New(name, c.datasets)
	if err != nil {
		return nil, err
	}
	c.envs[name] = env
	return env, nil
}
