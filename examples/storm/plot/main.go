// Command plot draws the storm lab's herd: retries reaching the provider
// per 100 ms after 200 clients failed together, one line per jitter mode.
// It reads the CSV that the lab writes when STORM_CSV is set and writes an
// SVG:
//
//	STORM_CSV=herd.csv go -C examples/storm test -run StormHerd .
//	go -C examples/storm/plot run . -in ../herd.csv -out ../../../docs/herd.svg
//
// It is a module of its own so that gonum never enters the library's
// go.mod.
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func main() {
	in := flag.String("in", "herd.csv", "the CSV written by the storm lab (STORM_CSV)")
	out := flag.String("out", "herd.svg", "the SVG to write")
	flag.Parse()
	log.SetFlags(0)
	if err := run(*in, *out); err != nil {
		log.Fatal(err)
	}
}

// series is one jitter mode's retries per bucket.
type series struct {
	name string
	xy   plotter.XYs
}

// read parses the CSV: a header "ms,<mode>,<mode>…", then one row per
// 100 ms bucket: the bucket's start in milliseconds and a count per mode.
func read(path string) ([]series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(recs) < 2 || len(recs[0]) < 2 || recs[0][0] != "ms" {
		return nil, errors.New(path + ": want a header ms,<mode>,… and at least one row")
	}
	ss := make([]series, len(recs[0])-1)
	for i := range ss {
		ss[i].name = recs[0][i+1]
	}
	for n, rec := range recs[1:] {
		ms, err := strconv.ParseFloat(rec[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", path, n+2, err)
		}
		for i := range ss {
			v, err := strconv.ParseFloat(rec[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: row %d: %w", path, n+2, err)
			}
			ss[i].xy = append(ss[i].xy, plotter.XY{X: ms / 1000, Y: v})
		}
	}
	return ss, nil
}

func run(in, out string) error {
	ss, err := read(in)
	if err != nil {
		return err
	}
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	p := plot.New()
	p.Title.Text = "200 clients fail together at t = 0, then retry (base 1 s)"
	p.X.Label.Text = "seconds after the failure"
	p.Y.Label.Text = "retries per 100 ms"
	p.Y.Min = 0
	top := 0.0
	for _, s := range ss {
		for _, pt := range s.xy {
			top = max(top, pt.Y)
		}
	}
	p.Y.Max = top * 1.1
	p.Add(plotter.NewGrid())
	// Top left, where the lines are low; the text runs right of the
	// thumbnails, so a viewer's substitute font cannot push it onto them.
	p.Legend.Top = true
	p.Legend.Left = true
	colors := []color.Color{
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // none: red
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // full: blue
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // equal: green
		color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // decorrelated: orange
	}
	for i, s := range ss {
		l, err := plotter.NewLine(steps(s.xy))
		if err != nil {
			return err
		}
		l.Color = colors[i%len(colors)]
		l.Width = vg.Points(1.5)
		if i >= len(colors) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(legend(s.name), l)
	}
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.Padding = vg.Points(4)
	p.Legend.YOffs = -vg.Points(6)
	p.Legend.XOffs = vg.Points(8)
	return p.Save(7*vg.Inch, 4*vg.Inch, out)
}

// steps turns per-bucket counts into a step line: each count is held
// across its 100 ms bucket.
func steps(xy plotter.XYs) plotter.XYs {
	var out plotter.XYs
	for i, pt := range xy {
		end := pt.X + 0.1
		if i+1 < len(xy) {
			end = xy[i+1].X
		}
		out = append(out, plotter.XY{X: pt.X, Y: pt.Y}, plotter.XY{X: end, Y: pt.Y})
	}
	return out
}

func legend(mode string) string {
	if mode == "none" {
		return "no jitter"
	}
	return mode + " jitter"
}
