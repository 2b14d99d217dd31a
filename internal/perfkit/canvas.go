package perfkit

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"strings"
	"unicode/utf8"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Plot geometry and colours shared by every chart.
const (
	// PlotWidth and PlotHeight are the size of every PNG.
	PlotWidth  = 900
	PlotHeight = 500

	glyphW      = 7  // basicfont.Face7x13 advance
	glyphH      = 13 // its line height
	glyphAscent = 11
)

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{0, 0, 0, 255}
	darkGray  = color.RGBA{80, 80, 80, 255}
	midGray   = color.RGBA{150, 150, 150, 255}
	gridGray  = color.RGBA{228, 228, 228, 255}
	frameGray = color.RGBA{120, 120, 120, 255}

	// palette is Okabe and Ito's, told apart by people with any common
	// colour vision deficiency; series also differ by marker shape.
	palette = []color.RGBA{
		{0, 114, 178, 255},   // blue
		{230, 159, 0, 255},   // orange
		{0, 158, 115, 255},   // bluish green
		{213, 94, 0, 255},    // vermillion
		{204, 121, 167, 255}, // reddish purple
		{86, 180, 233, 255},  // sky blue
	}
)

// hAlign and vAlign place text relative to its anchor point.
type hAlign int

const (
	alignLeft hAlign = iota
	alignCenter
	alignRight
)

type vAlign int

const (
	alignTop vAlign = iota
	alignMiddle
	alignBottom
)

// canvas is an RGBA image with the few drawing operations charts need:
// no anti-aliasing, which keeps the output exact and the code small.
type canvas struct {
	img *image.RGBA
}

func newCanvas(w, h int) *canvas {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c.img, c.img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	return c
}

func (c *canvas) set(x, y int, col color.RGBA) {
	if image.Pt(x, y).In(c.img.Rect) {
		c.img.SetRGBA(x, y, col)
	}
}

func (c *canvas) fill(r image.Rectangle, col color.RGBA) {
	draw.Draw(c.img, r.Intersect(c.img.Rect), image.NewUniform(col), image.Point{}, draw.Src)
}

// stroke draws the outline of r, one pixel wide, inside r.
func (c *canvas) stroke(r image.Rectangle, col color.RGBA) {
	for x := r.Min.X; x < r.Max.X; x++ {
		c.set(x, r.Min.Y, col)
		c.set(x, r.Max.Y-1, col)
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		c.set(r.Min.X, y, col)
		c.set(r.Max.X-1, y, col)
	}
}

// dot fills a disc of diameter width centred on (x, y).
func (c *canvas) dot(x, y, width float64, col color.RGBA) {
	if width <= 1 {
		c.set(int(math.Floor(x)), int(math.Floor(y)), col)
		return
	}
	r := width / 2
	for py := int(math.Floor(y - r)); py <= int(math.Ceil(y+r)); py++ {
		for px := int(math.Floor(x - r)); px <= int(math.Ceil(x+r)); px++ {
			dx, dy := float64(px)+0.5-x, float64(py)+0.5-y
			if dx*dx+dy*dy <= r*r {
				c.set(px, py, col)
			}
		}
	}
}

// line draws from (x0, y0) to (x1, y1), width pixels wide; with dash > 0
// it is dashed, dash pixels on and dash pixels off.
func (c *canvas) line(x0, y0, x1, y1, width float64, col color.RGBA, dash float64) {
	length := math.Hypot(x1-x0, y1-y0)
	steps := max(1, int(math.Ceil(length*2)))
	for i := 0; i <= steps; i++ {
		t := float64(i) / float64(steps)
		if dash > 0 && int(t*length/dash)%2 == 1 {
			continue
		}
		c.dot(x0+t*(x1-x0), y0+t*(y1-y0), width, col)
	}
}

// marker shapes tell series apart without colour.
type marker int

const (
	markerNone marker = iota
	markerCircle
	markerSquare
	markerTriangle
	markerDiamond
)

// mark draws a marker of the given size centred on (x, y); hollow markers
// are outlined, with a white inside.
func (c *canvas) mark(m marker, x, y, size float64, col color.RGBA, hollow bool) {
	r := size / 2
	inside := func(dx, dy float64) bool {
		switch m {
		case markerCircle:
			return dx*dx+dy*dy <= r*r
		case markerSquare:
			return math.Abs(dx) <= r*0.85 && math.Abs(dy) <= r*0.85
		case markerTriangle:
			// Apex up, base at y+r*0.8.
			return dy <= r*0.8 && dy >= -r && math.Abs(dx) <= (dy+r)*0.62
		case markerDiamond:
			return math.Abs(dx)+math.Abs(dy) <= r*1.15
		}
		return false
	}
	for py := int(math.Floor(y - r - 1)); py <= int(math.Ceil(y+r+1)); py++ {
		for px := int(math.Floor(x - r - 1)); px <= int(math.Ceil(x+r+1)); px++ {
			dx, dy := float64(px)+0.5-x, float64(py)+0.5-y
			if !inside(dx, dy) {
				continue
			}
			edge := !inside(dx-2, dy) || !inside(dx+2, dy) || !inside(dx, dy-2) || !inside(dx, dy+2)
			if hollow && !edge {
				c.set(px, py, white)
			} else {
				c.set(px, py, col)
			}
		}
	}
}

// textWidth is the width in pixels of s at scale 1.
func textWidth(s string) int { return utf8.RuneCountInString(asciiText(s)) * glyphW }

// asciiText spells s with the characters basicfont has: printable ASCII.
// The few others charts use get an ASCII stand-in, the rest a "?".
func asciiText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= ' ' && r <= '~':
			return r
		case r == 'µ':
			return 'u'
		case r == '×':
			return 'x'
		default:
			return '?'
		}
	}, s)
}

// text draws s anchored at (x, y), scaled by an integer factor (the bitmap
// font has one size). basicfont covers printable ASCII only: see
// asciiText.
func (c *canvas) text(x, y int, s string, col color.RGBA, scale int, ha hAlign, va vAlign) {
	if s == "" {
		return
	}
	glyphs := renderText(s, col)
	w, h := glyphs.Rect.Dx()*scale, glyphs.Rect.Dy()*scale
	x, y = anchor(x, y, w, h, ha, va)
	for gy := 0; gy < glyphs.Rect.Dy(); gy++ {
		for gx := 0; gx < glyphs.Rect.Dx(); gx++ {
			if glyphs.RGBAAt(gx, gy).A < 128 {
				continue
			}
			for sy := range scale {
				for sx := range scale {
					c.set(x+gx*scale+sx, y+gy*scale+sy, col)
				}
			}
		}
	}
}

// textUp draws s rotated a quarter turn anticlockwise (reading upwards),
// centred on (x, y): the y axis label.
func (c *canvas) textUp(x, y int, s string, col color.RGBA) {
	glyphs := renderText(s, col)
	w, h := glyphs.Rect.Dx(), glyphs.Rect.Dy()
	// After rotation the text is h wide and w high.
	x0, y0 := x-h/2, y-w/2
	for gy := range h {
		for gx := range w {
			if glyphs.RGBAAt(gx, gy).A >= 128 {
				c.set(x0+gy, y0+(w-1-gx), col)
			}
		}
	}
}

// textBox draws s like text, on a white box with a margin, so that it
// stays readable over grid lines and data.
func (c *canvas) textBox(x, y int, s string, col color.RGBA, ha hAlign, va vAlign) {
	w, h := textWidth(s), glyphH
	bx, by := anchor(x, y, w, h, ha, va)
	c.fill(image.Rect(bx-3, by-1, bx+w+3, by+h+1), white)
	c.text(x, y, s, col, 1, ha, va)
}

func anchor(x, y, w, h int, ha hAlign, va vAlign) (int, int) {
	switch ha {
	case alignCenter:
		x -= w / 2
	case alignRight:
		x -= w
	}
	switch va {
	case alignMiddle:
		y -= h / 2
	case alignBottom:
		y -= h
	}
	return x, y
}

// renderText draws s with basicfont on a transparent image of its size.
func renderText(s string, col color.RGBA) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, max(1, textWidth(s)), glyphH))
	d := font.Drawer{
		Dst:  img,
		Src:  image.NewUniform(col),
		Face: basicfont.Face7x13,
		Dot:  fixed.P(0, glyphAscent),
	}
	d.DrawString(asciiText(s))
	return img
}
