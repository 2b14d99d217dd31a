package perfkit

import (
	"image"
	"image/color"
	"math"
)

// point is one data point.
type point struct{ x, y float64 }

// series is one line of a lineChart.
type series struct {
	// name is its legend entry; without one it has none.
	name   string
	points []point
	color  color.RGBA
	marker marker
	hollow bool
	// noLine draws the markers only.
	noLine bool
	dashed bool
}

// refLine is a dashed reference line across the plot: a target, a limit.
type refLine struct {
	value float64
	label string
	// vertical lines are at x = value, the others at y = value.
	vertical bool
	color    color.RGBA
}

// lineChart is an x-y chart of lines with markers.
type lineChart struct {
	title, subtitle string
	xLabel, yLabel  string
	xLog, yLog      bool
	// xFromZero and yFromZero start linear axes at 0.
	xFromZero, yFromZero bool
	series               []series
	refs                 []refLine
}

// chartFrame is what every chart draws around its plot area: title,
// subtitle, legend row; it returns the area left for the plot.
func drawFrame(c *canvas, r image.Rectangle, title, subtitle string, legend []legendEntry) image.Rectangle {
	y := r.Min.Y + 8
	if title != "" {
		c.text(r.Min.X+(r.Dx())/2, y, title, black, 2, alignCenter, alignTop)
		y += 2*glyphH + 4
	}
	if subtitle != "" {
		c.text(r.Min.X+r.Dx()/2, y, subtitle, darkGray, 1, alignCenter, alignTop)
		y += glyphH + 4
	}
	if len(legend) > 0 {
		y += 2
		drawLegend(c, r.Min.X+r.Dx()/2, y, legend)
		y += glyphH + 6
	}
	return image.Rect(r.Min.X, y+4, r.Max.X, r.Max.Y)
}

// legendEntry is one item of the legend row.
type legendEntry struct {
	name   string
	color  color.RGBA
	marker marker
	hollow bool
	// line draws a short line sample; bar a filled box.
	line, bar, dashed bool
}

const legendSample = 26

// drawLegend draws the entries in one row centred on x.
func drawLegend(c *canvas, x, y int, entries []legendEntry) {
	widths := make([]int, len(entries))
	total := 0
	for i, e := range entries {
		widths[i] = legendSample + 6 + textWidth(e.name)
		total += widths[i]
	}
	total += 18 * (len(entries) - 1)
	cx := x - total/2
	mid := float64(y + glyphH/2)
	for i, e := range entries {
		switch {
		case e.bar:
			c.fill(image.Rect(cx+4, y+1, cx+legendSample-4, y+glyphH-1), e.color)
		case e.line:
			dash := 0.0
			if e.dashed {
				dash = 4
			}
			c.line(float64(cx), mid, float64(cx+legendSample), mid, 2, e.color, dash)
		}
		if e.marker != markerNone {
			c.mark(e.marker, float64(cx+legendSample/2), mid, 8, e.color, e.hollow)
		}
		c.text(cx+legendSample+6, y, e.name, black, 1, alignLeft, alignTop)
		cx += widths[i] + 18
	}
}

// draw renders the chart into r of c.
func (lc *lineChart) draw(c *canvas, r image.Rectangle) {
	var legend []legendEntry
	for _, s := range lc.series {
		if s.name != "" {
			legend = append(legend, legendEntry{name: s.name, color: s.color, marker: s.marker,
				hollow: s.hollow, line: !s.noLine, dashed: s.dashed})
		}
	}
	area := drawFrame(c, r, lc.title, lc.subtitle, legend)

	// Data ranges, reference lines included so that they are visible.
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range lc.series {
		for _, p := range s.points {
			if lc.xLog && p.x <= 0 || lc.yLog && p.y <= 0 {
				continue
			}
			xlo, xhi = math.Min(xlo, p.x), math.Max(xhi, p.x)
			ylo, yhi = math.Min(ylo, p.y), math.Max(yhi, p.y)
		}
	}
	for _, ref := range lc.refs {
		if ref.vertical {
			xlo, xhi = math.Min(xlo, ref.value), math.Max(xhi, ref.value)
		} else {
			ylo, yhi = math.Min(ylo, ref.value), math.Max(yhi, ref.value)
		}
	}
	if math.IsInf(xlo, 0) {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	// A little room around the data, so that no marker sits on the frame.
	xlo, xhi = pad(xlo, xhi, lc.xLog)
	ylo, yhi = pad(ylo, yhi, lc.yLog)
	xa := newAxis(xlo, xhi, lc.xLog, lc.xFromZero)
	ya := newAxis(ylo, yhi, lc.yLog, lc.yFromZero)

	// Margins: tick labels and axis labels outside the plot area.
	tickW := 0
	for _, t := range ya.ticks {
		tickW = max(tickW, textWidth(ya.label(t)))
	}
	plot := image.Rect(area.Min.X+tickW+glyphH+22, area.Min.Y, area.Max.X-24, area.Max.Y-2*glyphH-18)
	xa.p0, xa.p1 = float64(plot.Min.X), float64(plot.Max.X-1)
	ya.p0, ya.p1 = float64(plot.Max.Y-1), float64(plot.Min.Y)

	// Grid and ticks.
	for _, t := range xa.ticks {
		x := int(math.Round(xa.pos(t)))
		c.fill(image.Rect(x, plot.Min.Y, x+1, plot.Max.Y), gridGray)
		c.fill(image.Rect(x, plot.Max.Y, x+1, plot.Max.Y+5), frameGray)
		c.text(x, plot.Max.Y+7, xa.label(t), black, 1, alignCenter, alignTop)
	}
	for _, t := range ya.ticks {
		y := int(math.Round(ya.pos(t)))
		c.fill(image.Rect(plot.Min.X, y, plot.Max.X, y+1), gridGray)
		c.fill(image.Rect(plot.Min.X-5, y, plot.Min.X, y+1), frameGray)
		c.text(plot.Min.X-8, y, ya.label(t), black, 1, alignRight, alignMiddle)
	}
	c.stroke(plot, frameGray)
	c.text(plot.Min.X+plot.Dx()/2, plot.Max.Y+glyphH+12, lc.xLabel, black, 1, alignCenter, alignTop)
	c.textUp(area.Min.X+glyphH/2+2, plot.Min.Y+plot.Dy()/2, lc.yLabel, black)

	// Reference lines under the data.
	for _, ref := range lc.refs {
		col := ref.color
		if col.A == 0 {
			col = darkGray
		}
		if ref.vertical {
			x := xa.pos(ref.value)
			c.line(x, float64(plot.Min.Y), x, float64(plot.Max.Y-1), 1, col, 5)
		} else {
			y := ya.pos(ref.value)
			c.line(float64(plot.Min.X), y, float64(plot.Max.X-1), y, 1, col, 5)
		}
	}
	// Labels before the data: a label box must not hide a point.
	for _, ref := range lc.refs {
		col := ref.color
		if col.A == 0 {
			col = darkGray
		}
		if ref.vertical {
			x := int(math.Round(xa.pos(ref.value)))
			ha, dx := alignLeft, 5
			if x > plot.Min.X+plot.Dx()*2/3 {
				ha, dx = alignRight, -5
			}
			c.textBox(x+dx, plot.Min.Y+6, ref.label, col, ha, alignTop)
		} else {
			y := int(math.Round(ya.pos(ref.value)))
			c.textBox(plot.Max.X-6, y-3, ref.label, col, alignRight, alignBottom)
		}
	}
	for _, s := range lc.series {
		width := 2.0
		dash := 0.0
		if s.dashed {
			dash = 6
		}
		if !s.noLine {
			for i := 1; i < len(s.points); i++ {
				a, b := s.points[i-1], s.points[i]
				if lc.xLog && (a.x <= 0 || b.x <= 0) || lc.yLog && (a.y <= 0 || b.y <= 0) {
					continue
				}
				c.line(xa.pos(a.x), ya.pos(a.y), xa.pos(b.x), ya.pos(b.y), width, s.color, dash)
			}
		}
		if s.marker != markerNone {
			for _, p := range s.points {
				if lc.xLog && p.x <= 0 || lc.yLog && p.y <= 0 {
					continue
				}
				c.mark(s.marker, xa.pos(p.x), ya.pos(p.y), 9, s.color, s.hollow)
			}
		}
	}
}

// barGroup is one series of a barChart: one bar per category.
type barGroup struct {
	name  string
	color color.RGBA
	// values has one value per category; NaN leaves the bar out.
	values []float64
	// low and high, if set, draw a whisker per bar (a range: min to max).
	low, high []float64
	// dots, if set, are individual samples drawn over each bar.
	dots [][]float64
}

// barChart is a horizontal grouped bar chart: categories top to bottom,
// one bar per group in each, values along x from 0. Horizontal, because
// the categories (fixture names) are long.
type barChart struct {
	title, subtitle string
	valueLabel      string
	categories      []string
	groups          []barGroup
	// notes has one text per category, printed in a column on the right
	// under noteHeader (a ratio, a verdict).
	notes      []string
	noteHeader string
	// format labels each bar with its value.
	format func(float64) string
	refs   []refLine
}

func (bc *barChart) draw(c *canvas, r image.Rectangle) {
	var legend []legendEntry
	for _, g := range bc.groups {
		legend = append(legend, legendEntry{name: g.name, color: g.color, bar: true})
	}
	area := drawFrame(c, r, bc.title, bc.subtitle, legend)

	hi := 0.0
	for _, g := range bc.groups {
		for i, v := range g.values {
			if !math.IsNaN(v) {
				hi = math.Max(hi, v)
			}
			if g.high != nil && !math.IsNaN(g.high[i]) {
				hi = math.Max(hi, g.high[i])
			}
			if g.dots != nil {
				for _, d := range g.dots[i] {
					hi = math.Max(hi, d)
				}
			}
		}
	}
	for _, ref := range bc.refs {
		hi = math.Max(hi, ref.value)
	}
	// Room after the longest bar for its value label.
	va := newAxis(0, hi*1.18, false, true)

	catW := 0
	for _, cat := range bc.categories {
		catW = max(catW, textWidth(cat))
	}
	noteW := textWidth(bc.noteHeader)
	for _, n := range bc.notes {
		noteW = max(noteW, textWidth(n))
	}
	right := area.Max.X - 24
	if noteW > 0 {
		right = area.Max.X - noteW - 30
	}
	top := area.Min.Y
	if bc.noteHeader != "" {
		top += glyphH + 4
	}
	plot := image.Rect(area.Min.X+catW+24, top, right, area.Max.Y-2*glyphH-18)
	va.p0, va.p1 = float64(plot.Min.X), float64(plot.Max.X-1)

	for _, t := range va.ticks {
		x := int(math.Round(va.pos(t)))
		c.fill(image.Rect(x, plot.Min.Y, x+1, plot.Max.Y), gridGray)
		c.fill(image.Rect(x, plot.Max.Y, x+1, plot.Max.Y+5), frameGray)
		c.text(x, plot.Max.Y+7, va.label(t), black, 1, alignCenter, alignTop)
	}
	c.stroke(plot, frameGray)
	c.text(plot.Min.X+plot.Dx()/2, plot.Max.Y+glyphH+12, bc.valueLabel, black, 1, alignCenter, alignTop)
	if bc.noteHeader != "" {
		c.text(plot.Max.X+14, top-4, bc.noteHeader, darkGray, 1, alignLeft, alignBottom)
	}

	n := len(bc.categories)
	if n == 0 {
		return
	}
	slot := float64(plot.Dy()) / float64(n)
	groups := len(bc.groups)
	barH := math.Min(26, (slot-10)/float64(groups))
	for i, cat := range bc.categories {
		cy := float64(plot.Min.Y) + slot*(float64(i)+0.5)
		c.text(plot.Min.X-10, int(cy), cat, black, 1, alignRight, alignMiddle)
		if i < len(bc.notes) {
			c.text(plot.Max.X+14, int(cy), bc.notes[i], black, 1, alignLeft, alignMiddle)
		}
		y0 := cy - barH*float64(groups)/2
		for j, g := range bc.groups {
			if i >= len(g.values) {
				continue
			}
			v := g.values[i]
			by := y0 + barH*float64(j)
			mid := by + barH/2
			end := va.p0
			if !math.IsNaN(v) {
				end = va.pos(v)
				c.fill(image.Rect(int(va.p0)+1, int(by)+1, int(math.Round(end)), int(by+barH)-1), g.color)
			}
			labelX := end
			if g.low != nil && !math.IsNaN(g.low[i]) && !math.IsNaN(g.high[i]) {
				lo, hi := va.pos(g.low[i]), va.pos(g.high[i])
				c.line(lo, mid, hi, mid, 1.5, black, 0)
				c.line(lo, mid-barH/3, lo, mid+barH/3, 1.5, black, 0)
				c.line(hi, mid-barH/3, hi, mid+barH/3, 1.5, black, 0)
				labelX = math.Max(labelX, hi)
			}
			if g.dots != nil {
				for _, d := range g.dots[i] {
					c.mark(markerCircle, va.pos(d), mid, 5, black, true)
					labelX = math.Max(labelX, va.pos(d)+3)
				}
			}
			if !math.IsNaN(v) && bc.format != nil {
				c.text(int(labelX)+5, int(mid), bc.format(v), black, 1, alignLeft, alignMiddle)
			} else if math.IsNaN(v) {
				c.text(int(va.p0)+5, int(mid), "(no result)", midGray, 1, alignLeft, alignMiddle)
			}
		}
	}
	for _, ref := range bc.refs {
		col := ref.color
		if col.A == 0 {
			col = darkGray
		}
		x := va.pos(ref.value)
		c.line(x, float64(plot.Min.Y), x, float64(plot.Max.Y-1), 1, col, 5)
		c.textBox(int(x)+4, plot.Max.Y-6, ref.label, col, alignLeft, alignBottom)
	}
}

// pad widens [lo, hi] by 3% of its span on each side (a factor on a log
// axis), keeping a non-negative lower end non-negative.
func pad(lo, hi float64, log bool) (float64, float64) {
	if log {
		return lo / 1.08, hi * 1.08
	}
	d := (hi - lo) * 0.03
	if lo >= 0 && lo-d < 0 {
		return 0, hi + d
	}
	return lo - d, hi + d
}
