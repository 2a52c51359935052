package sim

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"math/bits"
	"strings"

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
		Key   []keyItem
		Note  string
	}
	var secs []section
	add := func(title string, p *plot.Plot, wd, ht vg.Length, key []keyItem, note string) error {
		svg, err := renderSVG(p, wd, ht)
		if err != nil {
			return err
		}
		secs = append(secs, section{title, template.HTML(svg), key, note})
		return nil
	}
	// The usage charts of all policies share one y-scale, so that the
	// policies compare at a glance.
	ymax := 0.0
	for _, r := range rs {
		ymax = math.Max(ymax, usageMax(r))
	}
	for _, r := range rs {
		pal := newPalette(r.leafNames)
		p, err := ganttPlot(r, pal)
		if err != nil {
			return err
		}
		if err := add(r.Policy+": allocations on a sample of GPUs", p, 30*vg.Centimeter, 18*vg.Centimeter,
			pal.ganttKey(), ""); err != nil {
			return err
		}
		if len(r.leafNames) > 0 {
			p, err := usagePlot(r, pal, ymax)
			if err != nil {
				return err
			}
			if err := add(r.Policy+": GPUs used per budget (solid) against its allocation (dashed)", p, 30*vg.Centimeter, 16*vg.Centimeter,
				pal.teamKey(), "Same y-scale for every policy. Hourly means; unallocated work is not charged to any budget and is not drawn here."); err != nil {
				return err
			}
		}
	}
	for _, class := range []string{"debug", "train", "interactive", "other"} {
		p, key, note, ok, err := cdfPlot(rs, class)
		if err != nil {
			return err
		}
		if ok {
			if err := add("queue wait CDF: "+class, p, 16*vg.Centimeter, 10*vg.Centimeter, key, note); err != nil {
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

// keyItem is one entry of a chart's colour key, drawn as HTML beside the
// chart (never over its data). Style is a CSS background for the swatch.
type keyItem struct {
	Label string
	Style template.CSS
	Group string // a program's name starts a new line of the key
}

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>allot sim report</title>
<style>body{font-family:sans-serif;margin:2em;color:#1b1f24}pre{background:#f6f6f6;padding:1em}
.key{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:13px;max-width:30cm;margin:4px 0 8px}
.key .grp{flex-basis:100%;font-weight:bold;margin-top:4px}
.sw{display:inline-block;width:14px;height:10px;margin-right:5px;vertical-align:middle;border:1px solid #0003}
.note{font-size:13px;color:#4b5563;max-width:30cm}</style></head>
<body><h1>allot sim</h1><pre>{{.Summary}}</pre>
{{range .Sections}}<h2>{{.Title}}</h2>{{.SVG}}
{{if .Key}}<div class="key" role="list" aria-label="colour key">{{range .Key}}{{if .Group}}<span class="grp">{{.Group}}</span>{{end}}<span role="listitem"><span class="sw" style="background:{{.Style}}"></span>{{.Label}}</span>{{end}}</div>{{end}}
{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
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

// programHues are the hues (degrees) of the programs, in order: teams of a
// program share its hue in shades. Reds (hue within 25° of 0) are left out:
// red is the preemption edge of the Gantt view. The web UI uses the same.
var programHues = []float64{212, 140, 268, 32, 185, 300, 52, 240, 96, 196}

// unallocatedColor is the grey of unallocated work.
var unallocatedColor = color.RGBA{176, 176, 176, 255}

// preemptRed marks an allocation's stop by preemption or drain.
var preemptRed = color.RGBA{220, 0, 0, 255}

// palette colours each leaf by its program (the path's second element).
type palette struct {
	names    []string
	colors   []color.RGBA
	programs []string
	program  []int // by leaf
}

func newPalette(leafNames []string) *palette {
	p := &palette{names: leafNames, colors: make([]color.RGBA, len(leafNames)), program: make([]int, len(leafNames))}
	index := map[string]int{}
	members := map[int][]int{}
	for l, name := range leafNames {
		parts := strings.Split(name, "/")
		prog := parts[0]
		if len(parts) >= 2 {
			prog = parts[0] + "/" + parts[1] // a child of the root is its own program
		}
		k, ok := index[prog]
		if !ok {
			k = len(p.programs)
			index[prog] = k
			p.programs = append(p.programs, prog)
		}
		p.program[l] = k
		members[k] = append(members[k], l)
	}
	for k, ls := range members {
		hue := programHues[k%len(programHues)] / 360
		for i, l := range ls {
			// Shades from dark to light within the program.
			f := 0.5
			if len(ls) > 1 {
				f = float64(i) / float64(len(ls)-1)
			}
			r, g, b := hsv(hue, 0.75-0.35*f, 0.55+0.4*f)
			p.colors[l] = color.RGBA{r, g, b, 255}
		}
	}
	return p
}

// color is leaf's colour; unallocated work (leaf < 0) is grey.
func (p *palette) color(leaf int32) color.Color {
	if leaf < 0 || int(leaf) >= len(p.colors) {
		return unallocatedColor
	}
	return p.colors[leaf]
}

func css(c color.Color) template.CSS {
	r, g, b, _ := c.RGBA()
	return template.CSS(fmt.Sprintf("rgb(%d,%d,%d)", r>>8, g>>8, b>>8))
}

// teamKey lists the teams grouped by program.
func (p *palette) teamKey() []keyItem {
	var out []keyItem
	for k, prog := range p.programs {
		first := true
		for l, name := range p.names {
			if p.program[l] != k {
				continue
			}
			label := strings.TrimPrefix(name, prog+"/")
			if name == prog {
				label = name
			}
			it := keyItem{Label: label, Style: css(p.colors[l])}
			if first {
				it.Group, first = prog, false
			}
			out = append(out, it)
		}
	}
	return out
}

// ganttKey is the team key plus unallocated work, the hatching and the
// preemption edge.
func (p *palette) ganttKey() []keyItem {
	out := p.teamKey()
	return append(out,
		keyItem{Group: "marks", Label: "unallocated work (free, preemptible)", Style: css(unallocatedColor)},
		keyItem{Label: "hatched: preemptible (past its protected window)", Style: "repeating-linear-gradient(45deg,#8aa 0 3px,#fff 3px 5px)"},
		keyItem{Label: "red right edge: preempted, migrated or drained", Style: "linear-gradient(90deg,#8aa 70%,rgb(220,0,0) 70%)"})
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
	r        *Result
	from, to int64
	rows     int
	pal      *palette
}

func ganttPlot(r *Result, pal *palette) (*plot.Plot, error) {
	p := plot.New()
	from := max(r.horizon/2-ganttDays*86400/2, 0)
	to := min(from+ganttDays*86400, r.horizon)
	g := &gantt{r: r, from: from, to: to, rows: ganttRows, pal: pal}
	p.Add(g)
	p.X.Label.Text = "hours since the start of the trace"
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
		col := g.pal.color(g.r.jobRecords[a.job].leaf)
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
				c.StrokeLine2(draw.LineStyle{Color: preemptRed, Width: vg.Points(1.5)}, x1, y0, x1, y1)
			}
		}
	}
}

// usageMax is the highest hourly GPU mean or allocation of r's budgets.
func usageMax(r *Result) float64 {
	m := 0.0
	for l := range r.leafNames {
		m = math.Max(m, r.leafShares[l]*float64(r.GPUs))
		for _, v := range r.leafHours[l][0] {
			m = math.Max(m, float64(v)/3600)
		}
	}
	return m
}

func usagePlot(r *Result, pal *palette, ymax float64) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "hours"
	p.Y.Label.Text = "GPUs (hourly mean)"
	for l := range r.leafNames {
		del := r.leafHours[l][0]
		pts := make(plotter.XYs, len(del))
		for h, v := range del {
			pts[h] = plotter.XY{X: float64(h), Y: float64(v) / 3600}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color = pal.color(int32(l))
		alloc, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r.leafShares[l] * float64(r.GPUs)},
			{X: float64(r.horizon) / 3600, Y: r.leafShares[l] * float64(r.GPUs)}})
		if err != nil {
			return nil, err
		}
		alloc.Color, alloc.Dashes = line.Color, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line, alloc)
	}
	p.Y.Min, p.Y.Max = 0, math.Max(ymax*1.05, 1)
	return p, nil
}

// cdfPlot draws the wait CDF of class for each policy, with its key and a
// note on the jobs that never started (counted with their wait so far).
func cdfPlot(rs []*Result, class string) (*plot.Plot, []keyItem, string, bool, error) {
	p := plot.New()
	p.X.Label.Text = "wait (hours, log scale)"
	p.Y.Label.Text = "fraction of jobs started within"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	found := false
	var key []keyItem
	var never []string
	colors := []color.Color{color.RGBA{0, 90, 200, 255}, color.RGBA{200, 120, 0, 255}, color.RGBA{0, 150, 60, 255}}
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
				return nil, nil, "", false, err
			}
			line.Color = colors[k%len(colors)]
			line.Width = vg.Points(1.5)
			p.Add(line)
			key = append(key, keyItem{Label: fmt.Sprintf("%s (%d jobs)", r.Policy, len(w)), Style: css(line.Color)})
			never = append(never, fmt.Sprintf("%d of %s's %d", cw.Censored, r.Policy, len(w)))
		}
	}
	note := "Jobs that never started (" + strings.Join(never, ", ") + ") are counted with their wait up to the end of the run, " +
		"so the right end of each curve is a lower bound."
	// A log axis needs a positive, non-degenerate range: one second to at
	// least an hour.
	p.X.Min, p.X.Max = 1.0/3600, math.Max(p.X.Max, 1)
	return p, key, note, found, nil
}
