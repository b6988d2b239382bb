// Package server is nesy's HTTP API: constrained plan generation
// (POST /v1/plan, optionally streamed as NDJSON events), model listing
// (GET /v1/models), health and Prometheus metrics, the OpenAPI description
// (GET /openapi.json) and Ollama-compatible generation routes (/api/...).
//
// The parts, in the order a plan request meets them:
//
//   - routes.go: the mux, wrapped in metrics, panic recovery and bearer
//     authentication; unknown routes and methods answer JSON 404/405.
//   - plan.go: request checking (defaults, caps), task grounding from PDDL
//     text or an environment task, the response with the server's own
//     re-validation of the plan.
//   - admission.go: at most Options.MaxConcurrent requests run at once,
//     Options.MaxQueue wait in order; the rest get 429.
//   - registry.go: models by name (a --models-dir folder, the Ollama
//     store), loaded on demand, shared by the requests that use them and
//     unloaded when idle.
//   - planner.go: the request's view of its model (its share of the
//     engine's sequence slots, its own counters, every sequence released
//     at the end) and the call into package planner, which runs the method.
//   - errors.go: every error is JSON {"error", "code", ...} with a status
//     and a code from a documented set; the codes are in openapi.json.
//   - generate.go, ollama.go: the Ollama routes on the same engine.
//   - metrics.go: the Prometheus collectors (requests, tokens, engine,
//     GPUs, mask timings).
//
// A Server is made by New and served by Serve; Handler gives the
// http.Handler for tests and embedding.
package server
