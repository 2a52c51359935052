package sim

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"math/bits"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Gantt window: a sample of GPU rows over a stretch of days, so that a
// 1,024-GPU month stays a readable, small file.
const (
	ganttRows = 64
	ganttDays = 2
)

// WriteHTML writes one self-contained HTML report (inline SVG rendered by
// gonum/plot, no network): per policy a Gantt view of a GPU sample and the
// usage of each budget against its allocation, and wait-time CDFs per class.
func WriteHTML(w io.Writer, rs []*Result) error {
	type section struct {
		Title string
		SVG   template.HTML
	}
	var secs []section
	add := func(title string, p *plot.Plot, wd, ht vg.Length) error {
		svg, err := renderSVG(p, wd, ht)
		if err != nil {
			return err
		}
		secs = append(secs, section{title, template.HTML(svg)})
		return nil
	}
	for _, r := range rs {
		p, err := ganttPlot(r)
		if err != nil {
			return err
		}
		if err := add(r.Policy+": allocations on a sample of GPUs", p, 30*vg.Centimeter, 18*vg.Centimeter); err != nil {
			return err
		}
		if len(r.leafNames) > 0 {
			p, err := usagePlot(r)
			if err != nil {
				return err
			}
			if err := add(r.Policy+": GPUs used per budget (solid) against its allocation (dashed)", p, 30*vg.Centimeter, 16*vg.Centimeter); err != nil {
				return err
			}
		}
	}
	for _, class := range []string{"debug", "train", "interactive", "other"} {
		p, ok, err := cdfPlot(rs, class)
		if err != nil {
			return err
		}
		if ok {
			if err := add("queue wait CDF: "+class, p, 16*vg.Centimeter, 10*vg.Centimeter); err != nil {
				return err
			}
		}
	}
	var summary bytes.Buffer
	if err := WriteSummary(&summary, rs); err != nil {
		return err
	}
	return reportTmpl.Execute(w, map[string]any{"Summary": summary.String(), "Sections": secs})
}

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>allot sim report</title>
<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em}</style></head>
<body><h1>allot sim</h1><pre>{{.Summary}}</pre>
{{range .Sections}}<h2>{{.Title}}</h2>{{.SVG}}
{{end}}</body></html>
`))

func renderSVG(p *plot.Plot, w, h vg.Length) (string, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	out := b.Bytes()
	if k := bytes.Index(out, []byte("<svg")); k > 0 {
		out = out[k:] // drop the XML prolog for inline use
	}
	return string(out), nil
}

// teamColor gives each leaf its own hue; unallocated work is grey.
func teamColor(leaf int32, n int) color.Color {
	if leaf < 0 {
		return color.RGBA{170, 170, 170, 255}
	}
	h := float64(leaf) / float64(max(n, 1))
	r, g, b := hsv(h, 0.65, 0.85)
	return color.RGBA{r, g, b, 255}
}

func hsv(h, s, v float64) (uint8, uint8, uint8) {
	i := math.Floor(h * 6)
	f := h*6 - i
	p, q, t := v*(1-s), v*(1-f*s), v*(1-(1-f)*s)
	var r, g, b float64
	switch int(i) % 6 {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return uint8(r * 255), uint8(g * 255), uint8(b * 255)
}

// gantt is a plot.Plotter drawing one bar per allocation and GPU row.
type gantt struct {
	r          *Result
	from, to   int64
	rows       int
	teams      int
	preemptRed color.Color
}

func ganttPlot(r *Result) (*plot.Plot, error) {
	p := plot.New()
	from := max(r.horizon/2-ganttDays*86400/2, 0)
	to := min(from+ganttDays*86400, r.horizon)
	g := &gantt{r: r, from: from, to: to, rows: ganttRows, teams: len(r.leafNames), preemptRed: color.RGBA{220, 0, 0, 255}}
	p.Add(g)
	p.X.Label.Text = "hours since the start of the trace (hatched: preemptible; red edge: preempted)"
	p.Y.Label.Text = "GPU (sample)"
	p.X.Min, p.X.Max = float64(from)/3600, float64(to)/3600
	p.Y.Min, p.Y.Max = 0, float64(ganttRows)
	return p, nil
}

// Plot implements plot.Plotter.
func (g *gantt) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	hour := func(t int64) float64 { return float64(t) / 3600 }
	for k := range g.r.allocRecords {
		a := &g.r.allocRecords[k]
		end := a.end
		if end < 0 {
			end = g.r.horizon
		}
		if end <= g.from || a.start >= g.to {
			continue
		}
		s, e := max(a.start, g.from), min(end, g.to)
		col := teamColor(g.r.jobRecords[a.job].leaf, g.teams)
		for m := a.mask; m != 0; m &= m - 1 {
			row := g.r.nodeRows[a.node] + bits.TrailingZeros64(m)
			if row >= g.rows {
				continue
			}
			y0, y1 := ty(float64(row)+0.1), ty(float64(row)+0.9)
			x0, x1 := tx(hour(s)), tx(hour(e))
			c.FillPolygon(col, []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
			if a.preemptAt >= 0 && a.preemptAt < e {
				hs := tx(hour(max(a.preemptAt, s)))
				ls := draw.LineStyle{Color: color.White, Width: vg.Points(0.4)}
				for x := hs; x < x1; x += vg.Points(3) {
					c.StrokeLine2(ls, x, y0, min(x+vg.Points(3), x1), y1)
				}
			}
			if a.end >= 0 && a.end <= g.to && a.endReason != StopFinished {
				c.StrokeLine2(draw.LineStyle{Color: g.preemptRed, Width: vg.Points(1.5)}, x1, y0, x1, y1)
			}
		}
	}
}

func usagePlot(r *Result) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "hours"
	p.Y.Label.Text = "GPUs (hourly mean)"
	for l, name := range r.leafNames {
		del := r.leafHours[l][0]
		pts := make(plotter.XYs, len(del))
		for h, v := range del {
			pts[h] = plotter.XY{X: float64(h), Y: float64(v) / 3600}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color = teamColor(int32(l), len(r.leafNames))
		alloc, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r.leafShares[l] * float64(r.GPUs)},
			{X: float64(r.horizon) / 3600, Y: r.leafShares[l] * float64(r.GPUs)}})
		if err != nil {
			return nil, err
		}
		alloc.Color, alloc.Dashes = line.Color, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line, alloc)
		p.Legend.Add(name, line)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

func cdfPlot(rs []*Result, class string) (*plot.Plot, bool, error) {
	p := plot.New()
	p.X.Label.Text = "wait (hours, log scale)"
	p.Y.Label.Text = "fraction of jobs started within"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	found := false
	palette := []color.Color{color.RGBA{0, 90, 200, 255}, color.RGBA{220, 90, 0, 255}, color.RGBA{0, 150, 60, 255}}
	for k, r := range rs {
		for _, cw := range r.Waits {
			if cw.Class != class || len(cw.sortedWaits) == 0 {
				continue
			}
			found = true
			w := cw.sortedWaits
			step := max(len(w)/400, 1)
			var pts plotter.XYs
			for i := 0; i < len(w); i += step {
				pts = append(pts, plotter.XY{X: math.Max(float64(w[i])/3600, 1.0/3600), Y: float64(i+1) / float64(len(w))})
			}
			pts = append(pts, plotter.XY{X: math.Max(float64(w[len(w)-1])/3600, 1.0/3600), Y: 1})
			line, err := plotter.NewLine(pts)
			if err != nil {
				return nil, false, err
			}
			line.Color = palette[k%len(palette)]
			line.Width = vg.Points(1.5)
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s (%d jobs)", r.Policy, len(w)), line)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	// A log axis needs a positive, non-degenerate range: one second to at
	// least an hour.
	p.X.Min, p.X.Max = 1.0/3600, math.Max(p.X.Max, 1)
	return p, found, nil
}
