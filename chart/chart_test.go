package chart_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"testing"

	"gonum.org/v1/plot/plotutil"

	"github.com/gpubot/gpubot/chart"
)

// decode checks that b is a PNG of w × h inches at gonum's 96 dpi.
func decode(t *testing.T, b []byte, w, h float64) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got.X != int(w*96) || got.Y != int(h*96) {
		t.Fatalf("size %v, want %v×%v", got, int(w*96), int(h*96))
	}
	return img
}

// count returns how many pixels have the colour c (ignoring alpha).
func count(img image.Image, c color.Color) int {
	r0, g0, b0, _ := c.RGBA()
	n := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 == r0>>8 && g>>8 == g0>>8 && b>>8 == b0>>8 {
				n++
			}
		}
	}
	return n
}

// Stacked bars are drawn in their styles' colours, a taller stack with
// more of them; two panels share one canvas.
func TestStackedBarsAndLines(t *testing.T) {
	days := []string{"Mon", "Tue", "Wed"}
	bars := chart.Panel{Title: "GPU-hours", Categories: days, YMin: chart.At(0), YHeadroom: 0.15, LegendTop: true,
		Bars: []chart.Bars{
			{Name: "nlp", Values: []float64{10, 20, 30}, Style: 0, Width: 28, Stacked: true},
			{Name: "vision", Values: []float64{30, 20, 10}, Style: 1, Width: 28, Stacked: true},
		}}
	lines := chart.Panel{Title: "waits", LogX: true, XTicks: []chart.Tick{{Value: 1, Label: "1s"}, {Value: 60, Label: "1m"}},
		Lines: []chart.Line{{Name: "cdf", Points: []chart.XY{{X: 1, Y: 0}, {X: 60, Y: 1}}}}}
	b, err := chart.PNG([][]chart.Panel{{bars}, {lines}}, 6, 6)
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, b, 6, 6)
	nlp, vision := count(img, plotutil.Color(0)), count(img, plotutil.Color(1))
	if nlp < 500 || vision < 500 {
		t.Errorf("bars hardly drawn: %d pixels of nlp's colour, %d of vision's", nlp, vision)
	}
}

// Only the bars drawn differ: a panel with a series of zeros draws no
// bar of its colour.
func TestZeroBarsDrawNothing(t *testing.T) {
	p := chart.Panel{Categories: []string{"a", "b"}, YMin: chart.At(0), YMax: chart.At(10),
		Bars: []chart.Bars{{Values: []float64{0, 0}, Style: 2}}}
	b, err := chart.PNG([][]chart.Panel{{p}}, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(decode(t, b, 4, 3), plotutil.Color(2)); n > 40 {
		t.Errorf("%d pixels of the bars' colour for bars of height 0", n)
	}
}

func TestErrors(t *testing.T) {
	if _, err := chart.PNG(nil, 4, 3); err == nil {
		t.Error("no panels: no error")
	}
	bad := chart.Panel{Title: "bad", Lines: []chart.Line{{Name: "nan", Points: []chart.XY{{X: 1, Y: math.NaN()}}}}}
	if _, err := chart.PNG([][]chart.Panel{{bad}}, 4, 3); err == nil {
		t.Error("a NaN point: no error")
	}
}
