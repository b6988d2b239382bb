package explore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/models"
)

func startMsgs(user string) []models.Message {
	return []models.Message{
		{Role: "system", Content: "You pick one option."},
		{Role: "user", Content: user},
	}
}

func TestChooseReturnsAnOption(t *testing.T) {
	lm := tinyModel(t)
	cases := []struct {
		name    string
		options []string
	}{
		{"shared prefixes", []string{"go to drawer 1", "go to drawer 10", "go to drawer 2", "go to desk 1"}},
		{"one is a prefix of another", []string{"look", "look at lamp 1"}},
		{"different first words", []string{"open safe 1", "close safe 1", "look", "done"}},
		{"multi-byte", []string{"café au lait", "caffè", "crème brûlée"}},
		{"single option", []string{"go to fridge 1"}},
	}
	for _, tc := range cases {
		for _, temp := range []float64{0, 1, 5} {
			for seed := uint64(0); seed < 3; seed++ {
				d, err := NewDialog(lm, startMsgs("Where next?"), DialogOptions{Temperature: temp, Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				i, err := d.Choose(context.Background(), tc.options)
				if err != nil {
					t.Fatalf("%s (T=%v seed %d): %v", tc.name, temp, seed, err)
				}
				if i < 0 || i >= len(tc.options) {
					t.Fatalf("%s: index %d out of %d options", tc.name, i, len(tc.options))
				}
				msgs := d.Messages()
				if last := msgs[len(msgs)-1]; last.Role != "assistant" || last.Content != tc.options[i] {
					t.Fatalf("%s: last message %+v, want the assistant saying %q", tc.name, last, tc.options[i])
				}
				u := d.Usage()
				if u.Choices != 1 {
					t.Fatalf("%s: %d choices counted", tc.name, u.Choices)
				}
				if len(tc.options) == 1 {
					if u.Forced != 1 || u.ModelCalls != 0 || u.GeneratedTokens != 0 {
						t.Fatalf("%s: a single option must be taken without the model, usage %+v", tc.name, u)
					}
				} else if u.GeneratedTokens == 0 || u.ModelCalls == 0 || u.EvaluatedTokens < u.PromptTokens {
					t.Fatalf("%s: usage %+v", tc.name, u)
				}
				d.Close()
			}
		}
	}
}

func TestChooseRejectsBadOptions(t *testing.T) {
	lm := tinyModel(t)
	for _, opts := range [][]string{nil, {"a\nb", "c"}, {"", "x"}} {
		d, err := NewDialog(lm, startMsgs("?"), DialogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Choose(context.Background(), opts); err == nil {
			t.Errorf("options %q: no error", opts)
		}
		d.Close()
	}
	if _, err := NewDialog(lm, nil, DialogOptions{Temperature: -1}); err == nil {
		t.Error("negative temperature accepted")
	}
}

// A dialog that reuses its cache across turns must choose exactly what a
// fresh dialog over the same conversation chooses, while evaluating less.
func TestDialogReuseMatchesFresh(t *testing.T) {
	lm := tinyModel(t)
	ctx := context.Background()
	turns := [][]string{
		{"go to cabinet 1", "go to cabinet 2", "go to countertop 1", "go to fridge 1"},
		{"open cabinet 2", "go to sinkbasin 1", "go to countertop 1"},
		{"go to fridge 1", "go to microwave 1", "go to toaster 1", "look"},
		{"take apple 1 from fridge 1", "close fridge 1"},
	}
	for _, temp := range []float64{0, 2} {
		d, err := NewDialog(lm, startMsgs("You are in a kitchen. Find an apple."), DialogOptions{Temperature: temp, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		for k, opts := range turns {
			before := d.Usage()
			// A fresh dialog over the same conversation, same sampler state
			// only for greedy decoding.
			fresh, err := NewDialog(lm, d.Messages(), DialogOptions{})
			if err != nil {
				t.Fatal(err)
			}
			i, err := d.ChooseNote(ctx, opts, "Options: "+strings.Join(opts, ", "))
			if err != nil {
				t.Fatal(err)
			}
			if temp == 0 {
				j, err := fresh.ChooseNote(ctx, opts, "Options: "+strings.Join(opts, ", "))
				if err != nil {
					t.Fatal(err)
				}
				if i != j {
					t.Fatalf("turn %d: the cached dialog chose %q, a fresh one %q", k, opts[i], opts[j])
				}
				if k > 0 {
					spent := d.Usage().EvaluatedTokens - before.EvaluatedTokens
					if spent >= fresh.Usage().EvaluatedTokens {
						t.Fatalf("turn %d: the cached dialog evaluated %d tokens, a fresh one %d: no prefix reuse", k, spent, fresh.Usage().EvaluatedTokens)
					}
				}
			}
			fresh.Close()
			// The note is for this turn only.
			for _, m := range d.Messages() {
				if strings.Contains(m.Content, "Options:") {
					t.Fatalf("turn %d: the note stayed in the conversation: %q", k, m.Content)
				}
			}
			d.Add(models.Message{Role: "user", Content: "You arrive somewhere. Nothing happens."})
		}
		d.Close()
	}
}

func TestDialogDropsOldTurnsToFit(t *testing.T) {
	lm := loadModel(t, models.Options{ContextLength: 256, BatchSize: 256})
	first := "You are in the middle of a room. Your task is to: find the key."
	d, err := NewDialog(lm, startMsgs(first), DialogOptions{KeepTurns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	opts := []string{"go to drawer 1", "go to drawer 2", "go to shelf 1"}
	for k := 0; k < 30; k++ {
		if _, err := d.Choose(context.Background(), opts); err != nil {
			t.Fatalf("turn %d: %v", k, err)
		}
		d.Add(models.Message{Role: "user", Content: "You arrive at loc 7. On the drawer 1, you see a pen 1, a pencil 2, and a book 3."})
	}
	msgs := d.Messages()
	if msgs[0].Role != "system" || msgs[1].Content != first {
		t.Fatalf("the system message and the first user message must be kept, got %q, %q", msgs[0].Content, msgs[1].Content)
	}
	if len(msgs) >= 2+2*30 {
		t.Fatalf("no turn was dropped: %d messages", len(msgs))
	}
	if d.Usage().Choices != 30 {
		t.Fatalf("%d choices", d.Usage().Choices)
	}
}

func TestDialogContextTooSmall(t *testing.T) {
	lm := loadModel(t, models.Options{ContextLength: 64, BatchSize: 64})
	d, err := NewDialog(lm, startMsgs(strings.Repeat("a very long observation ", 40)), DialogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = d.Choose(context.Background(), []string{"x", "y"})
	if !errors.Is(err, models.ErrContextLength) {
		t.Fatalf("got %v, want ErrContextLength", err)
	}
}

func TestReplyIsOneBoundedLine(t *testing.T) {
	lm := tinyModel(t)
	for _, max := range []int{1, 3, 12} {
		d, err := NewDialog(lm, startMsgs("Say a command."), DialogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		line, err := d.Reply(context.Background(), max)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(line, "\n") || line != strings.TrimSpace(line) {
			t.Fatalf("reply %q is not one trimmed line", line)
		}
		if g := d.Usage().GeneratedTokens; g > max || g == 0 && line != "" {
			t.Fatalf("max %d: %d tokens generated for %q", max, g, line)
		}
		msgs := d.Messages()
		if last := msgs[len(msgs)-1]; last.Role != "assistant" || last.Content != line {
			t.Fatalf("last message %+v, want the reply", last)
		}
		d.Close()
	}
}

func TestChunksPutOneImageFirst(t *testing.T) {
	img := func(n int) int32 { return models.ImageToken(n) }
	cases := []struct {
		in   []int32
		want [][]int32
	}{
		{[]int32{1, 2, 3}, [][]int32{{1, 2, 3}}},
		{[]int32{img(0), 5, 6}, [][]int32{{img(0), 5, 6}}},
		{[]int32{1, img(0), 5, img(1), 7}, [][]int32{{1}, {img(0), 5}, {img(1), 7}}},
		{[]int32{img(0), img(1)}, [][]int32{{img(0)}, {img(1)}}},
		{nil, nil},
	}
	for _, tc := range cases {
		got := chunks(tc.in)
		if len(got) != len(tc.want) {
			t.Fatalf("chunks(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range got {
			if !slices.Equal(got[i], tc.want[i]) {
				t.Fatalf("chunks(%v) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

func TestMentionsWholePhrases(t *testing.T) {
	cases := []struct {
		text, name string
		want       bool
	}{
		{"you see a drawer 1, and a desk 2.", "drawer 1", true},
		{"you see a drawer 10.", "drawer 1", false},
		{"you see a drawer 10 and a drawer 1", "drawer 1", true},
		{"a sinkbasin 1", "basin 1", false},
		{"drawer 1", "drawer 1", true},
		{"", "drawer 1", false},
		{"drawer 1", "", false},
	}
	for _, tc := range cases {
		if got := mentions(tc.text, tc.name); got != tc.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", tc.text, tc.name, got, tc.want)
		}
	}
}

// TestDialogCandidateLogits: a dialog on an engine that computes only the
// logits a choice reads (the default on the CPU) makes the choices of one
// that computes them all, greedy and sampled, with passes that compute
// only the candidates.
func TestDialogCandidateLogits(t *testing.T) {
	turns := [][]string{
		{"go to cabinet 1", "go to cabinet 2", "go to countertop 1", "go to fridge 1"},
		{"open cabinet 2", "go to sinkbasin 1", "go to countertop 1"},
		{"go to fridge 1", "go to microwave 1", "go to toaster 1", "look"},
	}
	full, narrow := loadModel(t, models.Options{FullLogits: true}), loadModel(t, models.Options{})
	for _, temp := range []float64{0, 2} {
		var chose [2][]int
		for m, lm := range []models.LM{full, narrow} {
			d, err := NewDialog(lm, startMsgs("You are in a kitchen. Find an apple."), DialogOptions{Temperature: temp, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range turns {
				i, err := d.ChooseNote(context.Background(), opts, "Options: "+strings.Join(opts, ", "))
				if err != nil {
					t.Fatal(err)
				}
				chose[m] = append(chose[m], i)
				d.Add(models.Message{Role: "user", Content: "You arrive somewhere. Nothing happens."})
			}
			d.Close()
		}
		if !slices.Equal(chose[0], chose[1]) {
			t.Errorf("temperature %g: full logits chose %v, candidate logits %v", temp, chose[0], chose[1])
		}
	}
	if full.Stats().CandidatePasses != 0 || (narrow.Stats().CandidatePasses == 0) == (narrow.Info().Device == "CPU") {
		t.Errorf("candidate passes: %d with full logits, %d by default", full.Stats().CandidatePasses, narrow.Stats().CandidatePasses)
	}
}
