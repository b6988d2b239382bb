package server

import (
	"context"
	"errors"
	"testing"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// TestRequestLMShare: a request holds at most slots/concurrent sequences,
// new or forked, and gets them back as it releases them; evaluations are
// counted.
func TestRequestLMShare(t *testing.T) {
	path := testModel(t, t.TempDir(), "m", gguf.ArchQwen3)
	e, err := models.Load(context.Background(), path, models.Options{Threads: 1, Sequences: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, tt := range []struct{ concurrent, quota int }{{4, 3}, {1, 12}, {12, 2}, {100, 2}} {
		lm := newRequestLM(e, tt.concurrent)
		if lm.quota != tt.quota {
			t.Fatalf("%d concurrent: quota %d, want %d", tt.concurrent, lm.quota, tt.quota)
		}
		root, err := lm.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lm.Eval(context.Background(), []models.EvalRequest{{Seq: root, Tokens: []int32{5, 6, 7}}}); err != nil {
			t.Fatal(err)
		}
		held := []models.SeqID{root}
		for len(held) < tt.quota {
			s, err := lm.Fork(root, 3)
			if err != nil {
				t.Fatalf("fork %d of %d: %v", len(held), tt.quota, err)
			}
			held = append(held, s)
		}
		if _, err := lm.Fork(root, 3); !errors.Is(err, models.ErrNoSequences) {
			t.Errorf("fork beyond the share: %v", err)
		}
		if _, err := lm.NewSequence(); !errors.Is(err, models.ErrNoSequences) {
			t.Errorf("new sequence beyond the share: %v", err)
		}
		lm.Release(held[len(held)-1])
		s, err := lm.NewSequence()
		if err != nil {
			t.Errorf("after a release: %v", err)
		}
		held[len(held)-1] = s
		for _, s := range held {
			lm.Release(s)
		}
		if lm.calls.Load() != 1 || lm.evaluated.Load() != 3 {
			t.Errorf("counted %d calls, %d tokens", lm.calls.Load(), lm.evaluated.Load())
		}
		if n := e.Stats().SequencesInUse; n != 0 {
			t.Errorf("%d sequences in use after releasing all", n)
		}
	}
}

// TestDefaultSequences: without Engine.Sequences each running request gets
// SequencesPerRequest slots, and a request's share is exactly that.
func TestDefaultSequences(t *testing.T) {
	for _, concurrent := range []int{1, 3} {
		ts := startServer(t, Options{MaxConcurrent: concurrent})
		if code, _, body := ts.do("GET", "/v1/models", nil); code != 200 {
			t.Fatalf("GET /v1/models: %d %s", code, body)
		}
		st := ts.engine().Stats()
		if want := SequencesPerRequest * concurrent; st.SequenceSlots != want {
			t.Errorf("max concurrent %d: %d sequence slots, want %d", concurrent, st.SequenceSlots, want)
		}
		if q := newRequestLM(ts.engine(), concurrent).quota; q != SequencesPerRequest {
			t.Errorf("max concurrent %d: a request's share is %d, want %d", concurrent, q, SequencesPerRequest)
		}
	}
}

// TestRequestLMReleasesLeaks: a planner that returns without releasing its
// sequences (a leak, or an early error) still leaves none in use once the
// request ends; Close never closes the shared engine, and Stats are the
// request's own.
func TestRequestLMReleasesLeaks(t *testing.T) {
	path := testModel(t, t.TempDir(), "m", gguf.ArchQwen3)
	e, err := models.Load(context.Background(), path, models.Options{Threads: 1, Sequences: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	leaky := func(lm models.LM) {
		root, err := lm.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lm.Eval(context.Background(), []models.EvalRequest{{Seq: root, Tokens: []int32{5, 6, 7}}}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if _, err := lm.Fork(root, 2); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, end := range []string{"releaseAll", "Close"} {
		lm := newRequestLM(e, 1)
		leaky(lm)
		if st := lm.Stats(); st.SequencesInUse != 4 || st.ModelCalls != 1 || st.EvaluatedTokens != 3 {
			t.Errorf("request stats %+v, want 4 sequences, 1 call, 3 tokens", st)
		}
		if n := e.Stats().SequencesInUse; n != 4 {
			t.Fatalf("%d sequences in use before the end, want 4", n)
		}
		if end == "Close" {
			if err := lm.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			lm.releaseAll()
		}
		if n := e.Stats().SequencesInUse; n != 0 {
			t.Errorf("%s: %d sequences still in use", end, n)
		}
	}
	// The engine is still open after the requests' Close.
	s, err := e.NewSequence()
	if err != nil {
		t.Fatalf("the engine was closed by a request: %v", err)
	}
	e.Release(s)
}
