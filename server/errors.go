package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
)

// Error codes: the "code" field of every JSON error body. Clients branch on
// these, not on the message.
const (
	CodeBadRequest      = "bad_request"  // 400: malformed JSON, unknown field, bad parameter
	CodeUnauthorized    = "unauthorized" // 401: missing or wrong bearer token
	CodeNotFound        = "not_found"    // 404: no such route
	CodeMethod          = "method_not_allowed"
	CodeModelNotFound   = "model_not_found"      // 404: unknown model name
	CodeBodyTooLarge    = "body_too_large"       // 413: request body over --max-body
	CodePDDLTooLarge    = "pddl_too_large"       // 413: domain or problem text over the PDDL limit
	CodeBadPDDL         = "bad_pddl"             // 422: PDDL that does not parse or ground (with positions)
	CodeTooManyActions  = "too_many_actions"     // 422: more grounded actions than the limit
	CodeBadLexicon      = "bad_lexicon"          // 422: lexicon that does not fit the task
	CodeUnsolvable      = "unsolvable"           // 422: the goal is unreachable even in the delete relaxation
	CodeBudgetExhausted = "budget_exhausted"     // 422: a budget ran out before the goal was reached
	CodePromptTooLong   = "prompt_too_long"      // 422: the prompt does not fit the model's context (with the token counts)
	CodeOverCap         = "budget_over_cap"      // 400: a budget above the server's cap
	CodeUnknownEnv      = "unknown_env"          // 404: unknown environment or task id
	CodeQueueFull       = "queue_full"           // 429: the admission queue is full (Retry-After)
	CodeTooManyConns    = "too_many_connections" // 429: over --max-conns-per-client open connections (then closed)
	CodeBodyTimeout     = "body_timeout"         // 408: the request body took longer than --body-timeout
	CodeQueueTimeout    = "queue_timeout"        // 503: waited too long for a slot (Retry-After)
	CodeShuttingDown    = "shutting_down"        // 503: the server is draining (Retry-After)
	CodeModelBusy       = "model_capacity"       // 503: every loaded model is busy and no more may load (Retry-After)
	CodeCancelled       = "cancelled"            // the client went away (logged; nobody reads it)
	CodeInternal        = "internal"             // 500
)

// Position is a place in the request's PDDL text.
type Position struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

// apiError is an error with everything the JSON error body needs. Its body
// is {"error": message, "code": code, ...}: the "error" string is what
// Ollama's client reads (api.StatusError.ErrorMessage).
type apiError struct {
	Status     int        `json:"-"`
	Code       string     `json:"code"`
	Message    string     `json:"error"`
	Positions  []Position `json:"positions,omitempty"`
	RetryAfter int        `json:"retry_after,omitempty"` // seconds; also sent as the Retry-After header
	// PromptTokens and ContextLength are the counts of a prompt_too_long.
	PromptTokens  int `json:"prompt_tokens,omitempty"`
	ContextLength int `json:"context_length,omitempty"`
	// Result is the partial outcome of a plan that ran out of budget.
	Result *PlanResponse `json:"result,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// pddlError turns a PDDL parse or grounding error into a 422 that lists
// every position.
func pddlError(what string, err error) *apiError {
	e := &apiError{Status: http.StatusUnprocessableEntity, Code: CodeBadPDDL, Message: what + ": " + err.Error()}
	var list pddl.ErrorList
	var one *pddl.Error
	switch {
	case errors.As(err, &list):
		for _, pe := range list {
			e.Positions = append(e.Positions, Position{pe.Pos.File, pe.Pos.Line, pe.Pos.Col, pe.Msg})
		}
	case errors.As(err, &one):
		e.Positions = append(e.Positions, Position{one.Pos.File, one.Pos.Line, one.Pos.Col, one.Msg})
	}
	return e
}

// asAPIError maps any error to an apiError (500 for unknown ones).
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ptl *models.PromptTooLongError
	if errors.As(err, &ptl) {
		return promptTooLong(ptl)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "request body is larger than %d bytes", mbe.Limit)
	}
	if errors.Is(err, models.ErrBadImage) {
		return errorf(http.StatusBadRequest, CodeBadRequest, "%v", err)
	}
	if errors.Is(err, errShuttingDown) {
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 5}
	}
	return errorf(http.StatusInternalServerError, CodeInternal, "%v", err)
}

// promptTooLong is the 422 of a prompt longer than the model's context.
func promptTooLong(e *models.PromptTooLongError) *apiError {
	return &apiError{Status: http.StatusUnprocessableEntity, Code: CodePromptTooLong, PromptTokens: e.Tokens, ContextLength: e.ContextLength,
		Message: fmt.Sprintf("the prompt has %d tokens; the model's context holds %d (use a model with a longer context, a shorter task or lexicon, or a larger --ctx)", e.Tokens, e.ContextLength)}
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError writes err as a JSON error body with its status (and
// Retry-After where the client should come back).
func writeError(w http.ResponseWriter, err error) {
	ae := asAPIError(err)
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	writeJSON(w, ae.Status, ae)
}

// retrySeconds rounds a wait up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
