package models

import (
	"context"
	"errors"
	"testing"

	"github.com/nesy-dev/nesy/models/gguf"
)

func TestUniform(t *testing.T) {
	base := newTestEngine(t, gguf.Default(gguf.ArchQwen3), Options{})
	u := NewUniform(base, 4)
	info := u.Info()
	if info.Name != UniformName || info.Params != 0 || info.ContextLength < UniformContextLength {
		t.Fatalf("Info = %+v: want the name %q, no parameters and a context of at least %d", info, UniformName, UniformContextLength)
	}
	if u.Vocab() != base.Vocab() {
		t.Fatal("Vocab is not the base model's")
	}
	want, err := base.Tokenize("(go-to agent kitchen)", false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := u.Tokenize("(go-to agent kitchen)", false)
	if err != nil || len(got) != len(want) {
		t.Fatalf("Tokenize = %v, %v; want the base's %v", got, err, want)
	}
	ctx := context.Background()
	s, err := u.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	before := base.Stats().ModelCalls
	for _, tc := range []struct {
		name string
		req  EvalRequest
		rows int
		len  int
	}{
		{"last row", EvalRequest{Seq: s, Tokens: want}, 1, len(want)},
		{"all rows", EvalRequest{Seq: s, Tokens: want[:2], AllLogits: true}, 2, len(want) + 2},
		{"no tokens", EvalRequest{Seq: s}, 0, len(want) + 2},
	} {
		res, err := u.Eval(ctx, []EvalRequest{tc.req})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(res[0].Logits) != tc.rows || u.Len(s) != tc.len {
			t.Fatalf("%s: %d rows, length %d; want %d, %d", tc.name, len(res[0].Logits), u.Len(s), tc.rows, tc.len)
		}
		for _, row := range res[0].Logits {
			if len(row) != info.VocabSize {
				t.Fatalf("%s: row of %d logits, want %d", tc.name, len(row), info.VocabSize)
			}
			for _, v := range row {
				if v != 0 {
					t.Fatalf("%s: logit %v, want 0", tc.name, v)
				}
			}
		}
	}
	if base.Stats().ModelCalls != before {
		t.Fatal("the uniform prior ran the base model")
	}
	f, err := u.Fork(s, 3)
	if err != nil || u.Len(f) != 3 {
		t.Fatalf("Fork: %v, length %d; want 3", err, u.Len(f))
	}
	if err := u.Truncate(s, 1); err != nil || u.Len(s) != 1 {
		t.Fatalf("Truncate: %v, length %d; want 1", err, u.Len(s))
	}

	for _, tc := range []struct {
		name string
		reqs []EvalRequest
		want error
	}{
		{"unknown sequence", []EvalRequest{{Seq: 99, Tokens: want}}, ErrUnknownSequence},
		{"past the context", []EvalRequest{{Seq: s, Tokens: make([]int32, info.ContextLength)}}, ErrContextLength},
		{"images", []EvalRequest{{Seq: s, Tokens: want, Images: [][]byte{{1}}}}, ErrNoVision},
	} {
		if _, err := u.Eval(ctx, tc.reqs); !errors.Is(err, tc.want) {
			t.Errorf("%s: Eval error %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := u.Eval(ctx, []EvalRequest{{Seq: s, Tokens: []int32{int32(info.VocabSize)}}}); err == nil {
		t.Error("Eval of a token outside the vocabulary: no error")
	}
	if u.Len(s) != 1 {
		t.Fatalf("failed Evals changed the sequence: length %d, want 1", u.Len(s))
	}
	for range 2 {
		if _, err := u.NewSequence(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := u.NewSequence(); !errors.Is(err, ErrNoSequences) {
		t.Fatalf("NewSequence past the slots: %v, want ErrNoSequences", err)
	}
	u.Release(f)
	if _, err := u.NewSequence(); err != nil {
		t.Fatalf("NewSequence after Release: %v", err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Eval(ctx, []EvalRequest{{Seq: s, Tokens: want}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Eval after Close: %v, want ErrClosed", err)
	}
}
