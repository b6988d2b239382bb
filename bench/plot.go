package bench

// Plots are drawn with gonum.org/v1/plot and written as SVG by its vgsvg
// back end. A maintained plotting library gives correct axes, ticks, log
// scales, text metrics and legends in a few lines per chart, where
// hand-written SVG would need its own tick placement and text measurement;
// it is pure Go (no cgo), and a chart's SVG is deterministic for the same
// data.

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot file names in a run folder.
const (
	SuccessPlot = "success.svg"
	TokensPlot  = "tokens.svg"
)

// palette colours series (Okabe-Ito, readable by colour-blind readers).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{86, 180, 233, 255}, color.RGBA{213, 94, 0, 255},
	color.RGBA{240, 228, 66, 255}, color.RGBA{0, 0, 0, 255},
}

// writeRunPlots writes a run's plots and returns their file names.
func writeRunPlots(dir string, s *Summary, recs []Record) ([]string, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	labels := []string{"all tasks"}
	values := []float64{100 * s.SuccessRate}
	for _, t := range s.Types {
		labels = append(labels, fmt.Sprintf("%s (%d)", t.Type, t.Tasks))
		values = append(values, 100*t.SuccessRate)
	}
	title := fmt.Sprintf("%s on %s (%s): success by task type", s.Method, envTitle(s.Env), s.Mode)
	p, err := hbarPlot(title, "success (%)", labels, values)
	if err != nil {
		return nil, err
	}
	height := vg.Length(len(labels))*0.3*vg.Inch + 1.2*vg.Inch
	if err := saveSVG(p, filepath.Join(dir, SuccessPlot), 7*vg.Inch, height); err != nil {
		return nil, err
	}
	tp, err := tokensPlot(s, recs)
	if err != nil {
		return nil, err
	}
	if err := saveSVG(tp, filepath.Join(dir, TokensPlot), 7*vg.Inch, 4.2*vg.Inch); err != nil {
		return nil, err
	}
	return []string{SuccessPlot, TokensPlot}, nil
}

// hbarPlot draws one horizontal bar per label, the first at the top.
func hbarPlot(title, xlabel string, labels []string, values []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Min, p.X.Max = 0, 100
	p.Add(plotter.NewGrid())
	n := len(labels)
	vals := make(plotter.Values, n)
	rev := make([]string, n)
	for i := range labels {
		vals[n-1-i] = values[i]
		rev[n-1-i] = labels[i]
	}
	b, err := plotter.NewBarChart(vals, vg.Points(12))
	if err != nil {
		return nil, fmt.Errorf("bench: plot: %w", err)
	}
	b.Horizontal = true
	b.Color = palette[0]
	b.LineStyle.Width = 0
	p.Add(b)
	p.NominalY(rev...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	p.X.Tick.Marker = percentTicks{}
	return p, nil
}

// barPlot draws grouped vertical bars: one group per label, one bar per
// series, with a legend naming the series.
func barPlot(title, ylabel string, labels, series []string, values [][]float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min, p.Y.Max = 0, 100
	p.Add(plotter.NewGrid())
	ns := max(len(series), 1)
	w := vg.Points(math.Min(28, 160/float64(ns*max(len(labels), 1))))
	for i, name := range series {
		vals := make(plotter.Values, len(labels))
		for j := range labels {
			if j < len(values[i]) {
				vals[j] = values[i][j]
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		b.Color = palette[i%len(palette)]
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(ns-1)/2)
		p.Add(b)
		p.Legend.Add(name, b)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Max = 100 + 12*float64(ns) // room for the legend above the bars
	p.Y.Tick.Marker = percentTicks{}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.6, float64(len(labels))-0.4
	return p, nil
}

// tokensPlot draws the generated and evaluated tokens of every task (log
// scale; zero counts sit on the axis at 1).
func tokensPlot(s *Summary, recs []Record) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s on %s (%s): tokens per task", s.Method, envTitle(s.Env), s.Mode)
	p.X.Label.Text = "task (suite order)"
	p.X.Tick.Marker = intTicks{}
	p.Y.Label.Text = "tokens"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	top := 10.0
	for _, r := range recs {
		top = math.Max(top, 1.5*float64(max(r.EvaluatedTokens, r.GeneratedTokens)))
	}
	// A fixed range of at least a decade: log ticks need one.
	p.Y.Min, p.Y.Max = 1, top
	for i, series := range []struct {
		name string
		val  func(Record) int
	}{
		{"evaluated", func(r Record) int { return r.EvaluatedTokens }},
		{"generated", func(r Record) int { return r.GeneratedTokens }},
	} {
		pts := make(plotter.XYs, len(recs))
		for j, r := range recs {
			pts[j].X = float64(j + 1)
			pts[j].Y = math.Max(1, float64(series.val(r)))
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		sc.GlyphStyle.Color = palette[i]
		sc.GlyphStyle.Radius = vg.Points(2.5)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(sc)
		p.Legend.Add(series.name+" tokens", sc)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	return p, nil
}

// saveSVG writes p as an SVG file of the given size, with a margin on the
// right for the last tick label. Text names gonum/plot's Liberation Serif
// with its metric-compatible stand-ins after it, so that viewers without
// Liberation fonts lay it out as measured.
func saveSVG(p *plot.Plot, path string, width, height vg.Length) error {
	c := vgsvg.New(width, height)
	p.Draw(draw.Crop(draw.New(c), 0, -vg.Points(14), 0, 0))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	out := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Serif;"),
		[]byte("font-family:'Liberation Serif','Times New Roman',Times,serif;"))
	return writeFileAtomic(path, out)
}

// percentTicks marks 0, 20, ..., 100.
type percentTicks struct{}

func (percentTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := 0; v <= 100; v += 10 {
		label := ""
		if v%20 == 0 {
			label = fmt.Sprint(v)
		}
		t = append(t, plot.Tick{Value: float64(v), Label: label})
	}
	return t
}

// intTicks is plot.DefaultTicks with integer labels (non-integer ticks
// keep their marks but lose their labels).
type intTicks struct{}

func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			if v := ts[i].Value; v == math.Trunc(v) {
				ts[i].Label = fmt.Sprint(int64(v))
			} else {
				ts[i].Label = ""
			}
		}
	}
	return ts
}
