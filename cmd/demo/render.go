package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/choreo-gpu/choreo/trace"
)

// traceCmd works with the timelines --trace writes.
type traceCmd struct {
	Render renderCmd `cmd:"" help:"Draw a trace as a timeline picture: a row per rank and track, spans coloured by what made them, fence flows as lines."`
}

// renderCmd draws a trace with gonum.org/v1/plot: no browser, no network.
type renderCmd struct {
	In     string  `arg:"" help:"The trace (Chrome trace format, as --trace writes it)." type:"existingfile"`
	Out    string  `arg:"" help:"The picture; its extension picks the format: .png, .svg, .pdf."`
	From   float64 `help:"Start of the window, in microseconds from the trace's first event." default:"0"`
	To     float64 `help:"End of the window, in microseconds from the trace's first event (0: the end)." default:"0"`
	Width  float64 `help:"Width of the picture in centimetres." default:"32"`
	Around string  `help:"Draw only the window around the comm spans of this name (an op: allreduce, send, ...), the --nth of each rank's, overriding --from and --to." placeholder:"OP"`
	Nth    int     `help:"Which of each rank's --around spans: 1 the first, -1 the last." default:"1"`
}

// category colours, by the event's cat.
var catColors = map[string]color.RGBA{
	"gpu":       {70, 130, 180, 255}, // steel blue
	"comm":      {46, 139, 87, 255},  // sea green
	"fence":     {255, 140, 0, 255},  // dark orange
	"transport": {147, 112, 219, 255},
}

var failColor = color.RGBA{220, 20, 60, 255}

// Run draws c.In into c.Out.
func (c *renderCmd) Run(*globals) error {
	f, err := os.Open(c.In)
	if err != nil {
		return fmt.Errorf("trace render: %w", err)
	}
	tf, err := trace.ReadFile(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("trace render: %w", err)
	}
	from, to := c.From, c.To
	if c.Around != "" {
		if from, to, err = around(tf, c.Around, c.Nth); err != nil {
			return fmt.Errorf("trace render: %s: %w", c.In, err)
		}
	}
	tl := newTimeline(tf, from, to)
	if len(tl.rows) == 0 {
		return fmt.Errorf("trace render: %s: no event in the window", c.In)
	}
	p := plot.New()
	p.Title.Text = "choreo timeline: " + filepath.Base(c.In)
	p.X.Label.Text = "time (µs)"
	p.Add(tl)
	p.NominalY(tl.labels()...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(tl.rows))+2 // headroom for the legend
	p.X.Min, p.X.Max = tl.x0, tl.x1
	for _, cat := range []string{"gpu", "comm", "fence", "transport"} {
		p.Legend.Add(cat, swatch(catColors[cat]))
	}
	p.Legend.Add("failed", swatch(failColor))
	p.Legend.Add("fence flow", flowSwatch{})
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.YOffs = -0.2 * vg.Centimeter
	h := vg.Length(math.Max(8, 0.9*float64(len(tl.rows))+4)) * vg.Centimeter
	if err := p.Save(vg.Length(c.Width)*vg.Centimeter, h, c.Out); err != nil {
		return fmt.Errorf("trace render: %w", err)
	}
	fmt.Printf("%s: %d rows, %d spans, %d flows, %.1f µs\n", c.Out, len(tl.rows), len(tl.bars), len(tl.flows), tl.x1-tl.x0)
	return nil
}

// around is the window, in µs after the first event, that holds the nth
// comm span named op of every rank (1 the first, -1 the last), with a
// margin.
func around(f *trace.File, op string, nth int) (from, to float64, err error) {
	first := math.Inf(1)
	byRank := map[int][][2]float64{}
	for _, e := range f.TraceEvents {
		if e.Ph == "M" {
			continue
		}
		first = math.Min(first, e.TS)
		if e.Ph == "X" && e.Cat == "comm" && e.Name == op && e.Dur != nil {
			byRank[e.PID] = append(byRank[e.PID], [2]float64{e.TS, e.TS + *e.Dur})
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, spans := range byRank {
		slices.SortFunc(spans, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
		i := nth - 1
		if nth < 0 {
			i = len(spans) + nth
		}
		if i < 0 || i >= len(spans) {
			continue
		}
		lo, hi = math.Min(lo, spans[i][0]), math.Max(hi, spans[i][1])
	}
	if math.IsInf(lo, 1) {
		return 0, 0, fmt.Errorf("no comm span %q number %d", op, nth)
	}
	margin := 0.15 * (hi - lo)
	return math.Max(0, lo-margin-first), hi + margin - first, nil
}

// row is one track of one rank.
type row struct {
	pid, tid int
	name     string
}

// bar is a span on a row; depth is how deep it nests on its row; label
// is the text drawn in it where it is wide enough (its op and size).
type bar struct {
	row        int
	start, end float64
	depth      int
	async      bool
	col        color.Color
	label      string
}

// flowLine is a fence flow from (x0, row0) to (x1, row1).
type flowLine struct {
	x0, x1     float64
	row0, row1 int
}

// timeline is a trace laid out for plotting; it implements plot.Plotter.
type timeline struct {
	rows   []row
	bars   []bar
	flows  []flowLine
	x0, x1 float64
}

type trackKey struct{ pid, tid int }

// newTimeline lays out the events of f between from and to (µs after the
// first event; to 0: the end).
func newTimeline(f *trace.File, from, to float64) *timeline {
	names := map[trackKey]string{}
	first := math.Inf(1)
	for _, e := range f.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			if n, ok := e.Args["name"].(string); ok {
				names[trackKey{e.PID, e.TID}] = n
			}
		} else if e.Ph != "M" {
			first = math.Min(first, e.TS)
		}
	}
	lo, hi := first+from, math.Inf(1)
	if to > 0 {
		hi = first + to
	}
	in := func(a, b float64) bool { return b >= lo && a <= hi }
	tl := &timeline{x0: math.Inf(1), x1: math.Inf(-1)}
	rowOf := map[trackKey]int{}
	use := func(k trackKey) {
		if _, ok := rowOf[k]; !ok {
			rowOf[k] = -1
		}
	}
	type span struct {
		k          trackKey
		start, end float64
		async      bool
		col        color.Color
		label      string
	}
	var spans []span
	begins := map[string]trace.ChromeEvent{}
	flowStarts := map[string]trace.ChromeEvent{}
	type flowEnds struct{ s, f trace.ChromeEvent }
	var flows []flowEnds
	colorOf := func(e trace.ChromeEvent) color.Color {
		if e.Args["error"] != nil {
			return failColor
		}
		if c, ok := catColors[e.Cat]; ok {
			return c
		}
		return color.Gray{128}
	}
	for _, e := range f.TraceEvents {
		k := trackKey{e.PID, e.TID}
		switch e.Ph {
		case "X":
			end := e.TS
			if e.Dur != nil {
				end += *e.Dur
			}
			if in(e.TS, end) {
				spans = append(spans, span{k, e.TS, end, false, colorOf(e), spanLabel(e)})
			}
		case "b":
			begins[fmt.Sprint(e.PID, e.Cat, e.ID)] = e
		case "e":
			b, ok := begins[fmt.Sprint(e.PID, e.Cat, e.ID)]
			if ok && in(b.TS, e.TS) {
				spans = append(spans, span{trackKey{b.PID, b.TID}, b.TS, e.TS, true, colorOf(b), spanLabel(b)})
			}
		case "s":
			flowStarts[e.ID] = e
		case "f":
			if s, ok := flowStarts[e.ID]; ok && in(s.TS, e.TS) {
				flows = append(flows, flowEnds{s, e})
			}
		}
	}
	for _, s := range spans {
		use(s.k)
	}
	keys := make([]trackKey, 0, len(rowOf))
	for k := range rowOf {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b trackKey) int { return cmp.Or(cmp.Compare(a.pid, b.pid), cmp.Compare(a.tid, b.tid)) })
	for i, k := range keys { // rank 0's first track on top
		rowOf[k] = len(keys) - 1 - i
	}
	tl.rows = make([]row, len(keys))
	for k, r := range rowOf {
		tl.rows[r] = row{k.pid, k.tid, names[k]}
	}
	slices.SortStableFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end))
	})
	stacks := map[trackKey][]float64{} // ends of the open spans per track
	for _, s := range spans {
		st := stacks[s.k]
		for len(st) > 0 && st[len(st)-1] <= s.start {
			st = st[:len(st)-1]
		}
		depth := len(st)
		if !s.async {
			st = append(st, s.end)
		}
		stacks[s.k] = st
		a, b := math.Max(s.start, lo), math.Min(s.end, hi)
		tl.bars = append(tl.bars, bar{rowOf[s.k], a - first, b - first, depth, s.async, s.col, s.label})
		tl.x0, tl.x1 = math.Min(tl.x0, a-first), math.Max(tl.x1, b-first)
	}
	for _, fl := range flows {
		r0, ok0 := rowOf[trackKey{fl.s.PID, fl.s.TID}]
		r1, ok1 := rowOf[trackKey{fl.f.PID, fl.f.TID}]
		if ok0 && ok1 {
			tl.flows = append(tl.flows, flowLine{fl.s.TS - first, fl.f.TS - first, r0, r1})
		}
	}
	return tl
}

// labels are the rows' names, bottom row first (plot.NominalY's order).
func (t *timeline) labels() []string {
	out := make([]string, len(t.rows))
	for i, r := range t.rows {
		out[i] = fmt.Sprintf("rank %d  %s", r.pid, r.name)
	}
	return out
}

// spanLabel is a span's text: its name and, if it moved bytes, their
// size ("allreduce 4.0 KiB").
func spanLabel(e trace.ChromeEvent) string {
	if n, ok := argInt(e.Args["bytes"]); ok && n > 0 {
		return e.Name + " " + humanize.IBytes(uint64(n))
	}
	return e.Name
}

// argInt is a numeric arg as read (json.Number) or as made (a Go number).
func argInt(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case float64:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	return 0, false
}

// fitLabel is the longest of label and its first word that fits in
// width and height with style sty, or "" if neither does.
func fitLabel(sty text.Style, label string, width, height vg.Length) string {
	if label == "" || sty.Height(label) > height {
		return ""
	}
	for _, l := range []string{label, strings.Fields(label)[0]} {
		if sty.Width(l)+2*labelPad <= width {
			return l
		}
	}
	return ""
}

// labelPad is the room left of and right of a bar's label.
const labelPad = vg.Length(1.5)

// Plot implements plot.Plotter: the bars, nested ones thinner, each with
// its label where it is wide enough, then the flows over them.
func (t *timeline) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := p.X.Tick.Label
	sty.Color = color.White
	sty.Font.Size = vg.Points(6)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	for _, b := range t.bars {
		half := 0.36 * math.Pow(0.72, float64(b.depth))
		if b.async {
			half = 0.18
		}
		x0, x1 := trX(b.start), trX(b.end)
		if x1-x0 < 0.6 {
			x1 = x0 + 0.6 // a span too short to see still shows
		}
		y0, y1 := trY(float64(b.row)-half), trY(float64(b.row)+half)
		c.FillPolygon(b.col, []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
	}
	for i, b := range t.bars { // over every bar, each where no nested bar covers it
		from, to := t.labelRoom(i)
		x0, x1 := trX(from), trX(to)
		y0, y1 := trY(float64(b.row)-0.36*math.Pow(0.72, float64(b.depth))), trY(float64(b.row)+0.36*math.Pow(0.72, float64(b.depth)))
		if b.async {
			y0, y1 = trY(float64(b.row)-0.18), trY(float64(b.row)+0.18)
		}
		if l := fitLabel(sty, b.label, x1-x0, y1-y0); l != "" {
			c.FillText(sty, vg.Point{X: x0 + labelPad, Y: (y0 + y1) / 2}, l)
		}
	}
	ls := draw.LineStyle{Color: color.RGBA{200, 0, 0, 200}, Width: vg.Points(0.8)}
	for _, f := range t.flows {
		c.StrokeLine2(ls, trX(f.x0), trY(float64(f.row0)), trX(f.x1), trY(float64(f.row1)))
		c.FillPolygon(ls.Color, arrowHead(trX(f.x0), trY(float64(f.row0)), trX(f.x1), trY(float64(f.row1))))
	}
}

// arrowHead is a small triangle at (x1, y1) pointing away from (x0, y0).
func arrowHead(x0, y0, x1, y1 vg.Length) []vg.Point {
	dx, dy := float64(x1-x0), float64(y1-y0)
	l := math.Hypot(dx, dy)
	if l == 0 {
		return nil
	}
	dx, dy = dx/l, dy/l
	const size = 4.0
	bx, by := float64(x1)-size*dx, float64(y1)-size*dy
	return []vg.Point{
		{X: x1, Y: y1},
		{X: vg.Length(bx - size/2*dy), Y: vg.Length(by + size/2*dx)},
		{X: vg.Length(bx + size/2*dy), Y: vg.Length(by - size/2*dx)},
	}
}

// labelRoom is where bar i's label may go: the widest stretch of the
// bar that no bar nested in it covers. The bars are in order of start.
func (t *timeline) labelRoom(i int) (from, to float64) {
	b := t.bars[i]
	from, to = b.start, b.start
	at := b.start // the end of what is covered so far
	for _, n := range t.bars[i+1:] {
		if n.start >= b.end {
			break
		}
		if n.row != b.row || n.depth <= b.depth || n.async {
			continue
		}
		if n.start-at > to-from {
			from, to = at, n.start
		}
		at = max(at, n.end)
	}
	if b.end-at > to-from {
		from, to = at, b.end
	}
	return from, to
}

// DataRange implements plot.DataRanger.
func (t *timeline) DataRange() (xmin, xmax, ymin, ymax float64) {
	return t.x0, t.x1, -0.5, float64(len(t.rows)) - 0.5
}

// swatch is a legend entry: a filled box.
type swatch color.RGBA

// Thumbnail implements plot.Thumbnailer.
func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(color.RGBA(s), []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// flowSwatch is the legend entry of a flow: a line.
type flowSwatch struct{}

// Thumbnail implements plot.Thumbnailer.
func (flowSwatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	y := (r.Min.Y + r.Max.Y) / 2
	c.StrokeLine2(draw.LineStyle{Color: color.RGBA{200, 0, 0, 200}, Width: vg.Points(1)}, r.Min.X, y, r.Max.X, y)
}
