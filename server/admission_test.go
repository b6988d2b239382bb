package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestAdmissionFIFO: waiters get slots in arrival order, a waiter that gives
// up leaves the queue without taking a slot, and a full queue refuses.
func TestAdmissionFIFO(t *testing.T) {
	a := newAdmission(1, 3, 0, nil)
	hold, err := a.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 3)
	releases := make(chan func(), 3)
	gaveUp := make(chan error, 1)
	ctxQuit, quit := context.WithCancel(context.Background())
	for i := range 3 {
		ctx := context.Background()
		if i == 1 {
			ctx = ctxQuit
		}
		go func() {
			rel, err := a.acquire(ctx)
			if i == 1 {
				gaveUp <- err
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			releases <- rel
		}()
		waitFor(t, "the waiter to queue", func() bool { _, q := a.stats(); return q == i+1 })
	}
	// The queue is full: the next request is refused with 429.
	_, err = a.acquire(context.Background())
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RetryAfter < 1 {
		t.Fatalf("full queue: %v", err)
	}
	quit()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("waiter that gave up: %v", err)
	}
	hold()
	for _, want := range []int{0, 2} {
		select {
		case got := <-order:
			if got != want {
				t.Errorf("slot went to waiter %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no waiter got the slot")
		}
		(<-releases)()
	}
	if r, q := a.stats(); r != 0 || q != 0 {
		t.Errorf("running %d queued %d after all released", r, q)
	}
	a.drain()
	if _, err := a.acquire(context.Background()); !errors.Is(err, errShuttingDown) {
		t.Errorf("after drain: %v", err)
	}
}
