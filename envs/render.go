package envs

import (
	"image"
	"image/color"
	"image/draw"
	"sort"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/nesy-dev/nesy/pddl"
)

// renderer is a world that can draw what the agent sees.
type renderer interface {
	// render draws the view in s, reached by action a (-1 if none).
	render(s pddl.State, a int) image.Image
}

// View drawing: a title line, then one box per receptacle at the agent's
// location, labelled, with the objects seen on or in it listed inside;
// then what the agent holds and what "look" saw beside it. Only what the
// feedback text tells is drawn (the same visibility as Truth).
const (
	viewWidth  = 448
	lineHeight = 15
	margin     = 8
	boxGap     = 6
)

var (
	viewBackground = color.RGBA{246, 244, 238, 255}
	viewInk        = color.RGBA{20, 20, 20, 255}
	viewBox        = color.RGBA{70, 110, 160, 255}
	viewClosed     = color.RGBA{150, 150, 150, 255}
	viewObject     = color.RGBA{170, 60, 30, 255}
)

// canvas is an image being drawn, with a pen position.
type canvas struct {
	img *image.RGBA
	y   int
}

func (c *canvas) text(x int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13,
		Dot: fixed.P(x, c.y+11)}
	d.DrawString(s)
	c.y += lineHeight
}

func (c *canvas) rect(x0, y0, x1, y1 int, col color.Color) {
	for x := x0; x <= x1; x++ {
		c.img.Set(x, y0, col)
		c.img.Set(x, y1, col)
	}
	for y := y0; y <= y1; y++ {
		c.img.Set(x0, y, col)
		c.img.Set(x1, y, col)
	}
}

// wrap splits items into lines of at most width pixels of basicfont text.
func wrap(prefix string, items []string, width int) []string {
	max := width / 7
	var lines []string
	cur := prefix
	for i, it := range items {
		sep := ", "
		if i == 0 {
			sep = ""
		}
		if len(cur)+len(sep)+len(it) > max && cur != prefix {
			lines = append(lines, cur+",")
			cur, sep = "  ", ""
		}
		cur += sep + it
	}
	return append(lines, cur)
}

// render draws the agent's view of an ALFWorld state.
func (w *alfworld) render(s pddl.State, a int) image.Image {
	vis, objs := w.visible(s, a)
	sc := w.scene(s)
	seen := map[string]bool{}
	for _, o := range objs {
		seen[o] = true
	}
	// Contents of the receptacles here, as far as the text tells them.
	contents := map[string][]string{}
	for id, f := range w.task.Facts {
		if f.Predicate == "inreceptacle" && len(f.Args) == 2 && vis.Has(id) && s.Has(id) {
			contents[f.Args[1]] = append(contents[f.Args[1]], w.lex.Name(f.Args[0]))
		}
	}
	var here []string
	for r := range sc.here {
		here = append(here, r)
	}
	sort.Slice(here, func(i, j int) bool { return w.lex.Name(here[i]) < w.lex.Name(here[j]) })
	var held, floor []string
	v := view{w, s}
	for _, f := range v.Facts("holds") {
		if len(f) == 2 && f[0] == w.agent {
			held = append(held, w.lex.Name(f[1]))
		}
	}
	for id, f := range w.task.Facts {
		if f.Predicate == "objectatlocation" && vis.Has(id) && s.Has(id) {
			floor = append(floor, w.lex.Name(f.Args[0]))
		}
	}
	sort.Strings(held)
	sort.Strings(floor)

	// Lay out the lines first, to size the image.
	type box struct {
		label string
		lines []string
		open  bool
	}
	var title []string
	var boxes []box
	if len(here) == 0 {
		var all []string
		for _, r := range sortedKeys(w.locOfReceptacles()) {
			all = append(all, w.lex.Name(r))
		}
		sort.Strings(all)
		title = append([]string{"You are in the middle of a room. Around you:"}, wrap("  ", all, viewWidth-2*margin)...)
	} else {
		title = []string{"You are at " + w.lex.Name(sc.loc) + "."}
		for _, r := range here {
			label := w.lex.Name(r)
			open := sc.accessible[r]
			if v.Holds("openable", []string{r}) {
				if open {
					label += " (open)"
				} else {
					label += " (closed)"
				}
			}
			b := box{label: label, open: open}
			if items, ok := contents[r]; ok {
				sort.Strings(items)
				b.lines = wrap("  ", items, viewWidth-4*margin)
			} else if open && r == w.described(a) {
				b.lines = []string{"  nothing"}
			}
			boxes = append(boxes, b)
		}
	}
	var foot []string
	if len(held) > 0 {
		foot = append(foot, wrap("Holding: ", held, viewWidth-2*margin)...)
	}
	if len(floor) > 0 {
		foot = append(foot, wrap("Next to you: ", floor, viewWidth-2*margin)...)
	}
	h := margin + len(title)*lineHeight + margin
	for _, b := range boxes {
		h += (1+len(b.lines))*lineHeight + boxGap + 4
	}
	h += len(foot)*lineHeight + margin
	img := image.NewRGBA(image.Rect(0, 0, viewWidth, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(viewBackground), image.Point{}, draw.Src)
	c := &canvas{img: img, y: margin}
	for _, l := range title {
		c.text(margin, l, viewInk)
	}
	c.y += margin / 2
	for _, b := range boxes {
		col := viewBox
		if !b.open {
			col = viewClosed
		}
		top := c.y
		c.y += 2
		c.text(margin+4, b.label, col)
		for _, l := range b.lines {
			c.text(margin+4, l, viewObject)
		}
		c.rect(margin, top, viewWidth-margin, c.y+1, col)
		c.y += boxGap + 2
	}
	for _, l := range foot {
		c.text(margin, l, viewInk)
	}
	return img
}

// locOfReceptacles returns receptacle -> location (static facts).
func (w *alfworld) locOfReceptacles() map[string]string {
	out := map[string]string{}
	for _, f := range w.byPred["receptacleatlocation"] {
		if f.id < 0 && len(f.args) == 2 {
			out[f.args[0]] = f.args[1]
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
