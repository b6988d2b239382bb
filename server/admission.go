package server

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

var errShuttingDown = errors.New("server: shutting down")

// admission decides which requests run now: at most max at once, the rest
// wait in one FIFO queue of at most maxQueue (first come, first served, so
// no request is passed over). Requests beyond the queue are refused with
// 429; a request that waits longer than timeout, or arrives while the
// server drains, gets 503. Both carry Retry-After.
//
// Fairness inside the running set is the engine's: every admitted request's
// forward passes are merged into shared batches, each getting a share of
// every pass (models.Engine).
type admission struct {
	max      int
	maxQueue int
	timeout  time.Duration
	onChange func(running, queued int) // called with mu held; updates gauges

	mu       sync.Mutex // protects the fields below
	running  int
	queue    list.List // of *waiter, oldest first
	draining bool
	// avgHold is a running mean of how long a slot is held, for Retry-After.
	avgHold time.Duration
}

type waiter struct {
	ready chan struct{} // closed when the waiter owns a slot
}

func newAdmission(max, maxQueue int, timeout time.Duration, onChange func(running, queued int)) *admission {
	if onChange == nil {
		onChange = func(int, int) {}
	}
	return &admission{max: max, maxQueue: maxQueue, timeout: timeout, onChange: onChange}
}

// acquire waits for a slot. It returns a release function to call exactly
// once when the work is done, or an *apiError (429/503) or ctx's error.
func (a *admission) acquire(ctx context.Context) (release func(), err error) {
	a.mu.Lock()
	if a.draining {
		a.mu.Unlock()
		return nil, errShuttingDown
	}
	if a.running < a.max && a.queue.Len() == 0 {
		a.running++
		a.onChange(a.running, a.queue.Len())
		a.mu.Unlock()
		return a.releaser(), nil
	}
	if a.queue.Len() >= a.maxQueue {
		retry := a.retryAfterLocked()
		a.mu.Unlock()
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: CodeQueueFull,
			Message: "too many requests are waiting; retry later", RetryAfter: retry}
	}
	w := &waiter{ready: make(chan struct{})}
	el := a.queue.PushBack(w)
	a.onChange(a.running, a.queue.Len())
	a.mu.Unlock()

	var timeout <-chan time.Time
	if a.timeout > 0 {
		t := time.NewTimer(a.timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-w.ready:
		return a.releaser(), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout:
		err = &apiError{Status: http.StatusServiceUnavailable, Code: CodeQueueTimeout,
			Message: "no slot became free in " + a.timeout.String() + "; retry later"}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while giving up: pass the slot on.
		a.running--
		a.grantLocked()
	default:
		a.queue.Remove(el)
	}
	a.onChange(a.running, a.queue.Len())
	if ae, ok := err.(*apiError); ok {
		ae.RetryAfter = a.retryAfterLocked()
	}
	if a.draining {
		return nil, errShuttingDown
	}
	return nil, err
}

func (a *admission) releaser() func() {
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			held := time.Since(start)
			if a.avgHold == 0 {
				a.avgHold = held
			} else {
				a.avgHold = (7*a.avgHold + held) / 8
			}
			a.running--
			a.grantLocked()
			a.onChange(a.running, a.queue.Len())
		})
	}
}

// grantLocked hands free slots to the oldest waiters.
func (a *admission) grantLocked() {
	for a.running < a.max && a.queue.Len() > 0 {
		w := a.queue.Remove(a.queue.Front()).(*waiter)
		a.running++
		close(w.ready)
	}
}

// retryAfterLocked estimates when a slot will be free: the queue ahead
// drains at max slots per average hold time.
func (a *admission) retryAfterLocked() int {
	hold := a.avgHold
	if hold == 0 {
		hold = time.Second
	}
	waves := (a.queue.Len() + a.max) / max(a.max, 1)
	return retrySeconds(time.Duration(waves) * hold)
}

// drain refuses new requests (503 shutting_down). Requests already
// waiting stay in the queue: they are served while the shutdown deadline
// allows, and answered 503 when it cancels their contexts.
func (a *admission) drain() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = true
}

// stats returns the running and queued counts.
func (a *admission) stats() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running, a.queue.Len()
}

func (a *admission) isDraining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}
