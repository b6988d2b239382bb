package envs

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/pddl/search"
)

// TestALFWorldViews renders the agent's view along expert plans: every
// observation has a picture, the picture changes exactly when what the
// text tells changes, and the same state and action draw the same picture.
// With NESY_RENDER_DIR set, the views are written there as PNGs (with the
// text beside them) to be looked at.
func TestALFWorldViews(t *testing.T) {
	env := openEnv(t, "alfworld")
	dir := os.Getenv("NESY_RENDER_DIR")
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for n, info := range slice(env, 40) {
		ep, err := env.Open(context.Background(), info.ID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := search.Solve(context.Background(), ep.Task(), search.Options{MaxExpansions: 200000})
		if err != nil || res.Status != search.Solved {
			t.Fatalf("%s: planner %v %v", info.ID, res.Status, err)
		}
		obs, err := ep.Reset()
		if err != nil {
			t.Fatal(err)
		}
		encode := func(step int, text string) []byte {
			t.Helper()
			img, err := ep.Image()
			if err != nil {
				t.Fatalf("%s step %d: %v", info.ID, step, err)
			}
			b := img.Bounds()
			if b.Dx() < 100 || b.Dy() < 20 {
				t.Fatalf("%s step %d: a %v image", info.ID, step, b)
			}
			var buf bytes.Buffer
			if err := png.Encode(&buf, img); err != nil {
				t.Fatal(err)
			}
			again, _ := ep.Image()
			var buf2 bytes.Buffer
			if err := png.Encode(&buf2, again); err != nil || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
				t.Fatalf("%s step %d: the same view drew two pictures", info.ID, step)
			}
			if dir != "" {
				base := filepath.Join(dir, fmt.Sprintf("task%02d-step%02d", n, step))
				if err := os.WriteFile(base+".png", buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(base+".txt", []byte(text+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return buf.Bytes()
		}
		prevText, prevImg := obs.Text, encode(0, obs.Text)
		for i, a := range res.Plan {
			sr, err := ep.Step(ep.Lexicon().Text(a))
			if err != nil || sr.Action < 0 {
				t.Fatalf("%s: step %d refused: %v", info.ID, i, err)
			}
			img := encode(i+1, sr.Text)
			// Going to a receptacle, opening it and looking always change
			// the view (another place, contents shown, the floor listed).
			if name := ep.Task().Actions[a].Name; (name == "gotolocation" || name == "openobject") &&
				!strings.EqualFold(sr.Text, prevText) && bytes.Equal(img, prevImg) {
				t.Fatalf("%s: %q (%q) did not change the view", info.ID, ep.Lexicon().Text(a), sr.Text)
			}
			prevText, prevImg = sr.Text, img
		}
	}
}

// VirtualHome's partially observable variant hides what is inside a closed
// container until it is opened; then the feedback tells it and Truth
// shows it.
func TestVirtualHomePartial(t *testing.T) {
	full := openEnv(t, "virtualhome").(*Suite)
	env := full.Partial()
	checked := 0
	for _, info := range env.Tasks() {
		ep, err := env.Open(context.Background(), info.ID)
		if err != nil {
			t.Fatal(err)
		}
		obs, err := ep.Reset()
		if err != nil {
			t.Fatal(err)
		}
		w := ep.w.(*described)
		hid := w.hidden(ep.State())
		if len(hid) == 0 {
			if tr := ep.Truth(); tr.Visible.Len() != len(ep.Task().Facts) {
				t.Fatalf("%s: nothing hidden, but %d of %d facts visible", info.ID, tr.Visible.Len(), len(ep.Task().Facts))
			}
			continue
		}
		for o := range hid {
			if strings.Contains(" "+strings.Join(ep.Truth().Objects, " ")+" ", " "+o+" ") {
				t.Fatalf("%s: hidden %s is among the objects seen", info.ID, o)
			}
		}
		// Open the container of a hidden object.
		var obj, box string
		for _, f := range ep.State().Facts() {
			if fa := ep.Task().Facts[f]; fa.Predicate == "obj_inside" && hid[fa.Args[0]] {
				obj, box = fa.Args[0], fa.Args[1]
				break
			}
		}
		if obj == "" {
			continue // hidden by a static obj_inside
		}
		lex := ep.Lexicon()
		var last StepResult
		for _, cmd := range []string{"walk to " + lex.Name(box), "open " + lex.Name(box)} {
			if last, err = ep.Step(cmd); err != nil || last.Action < 0 {
				t.Fatalf("%s: %q: %v %q", info.ID, cmd, err, last.Text)
			}
		}
		if !strings.Contains(last.Text, "You see that") || !strings.Contains(last.Text, lex.Name(obj)) {
			t.Fatalf("%s: opening %s does not tell what is inside: %q (first view %q)", info.ID, box, last.Text, obs.Text)
		}
		if !strings.Contains(" "+strings.Join(ep.Truth().Objects, " ")+" ", " "+obj+" ") {
			t.Fatalf("%s: %s still unseen after opening %s", info.ID, obj, box)
		}
		if checked++; checked == 5 {
			break
		}
	}
	if checked == 0 {
		t.Fatal("no task hides an object in a closed container")
	}
}
