package sweep

import (
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
)

// WriteTable writes the side-by-side table: one row per set, speeds with
// their ratio against the first set (x1.00 for the first).
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "set\tpp t/s\tvs first\ttg t/s\tvs first\tspeed from\tTTFT\tvs first\tTTFT from\tmemory\tmemory from\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Set.Name,
			num(r.PP), ratio(r.PPRatio), num(r.TG), ratio(r.TGRatio), r.SpeedSource, dur(r.TTFT), ratio(r.TTFTRatio),
			r.TTFTSource, mem(r.MemoryBytes), r.MemorySource)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(w, "set %s failed: %s\n", r.Set.Name, r.Err)
		}
	}
	return nil
}

func num(f float64) string {
	if f <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", f)
}

func ratio(f float64) string {
	if f <= 0 {
		return "-"
	}
	if f < 0.1 {
		return fmt.Sprintf("x%.3f", f)
	}
	return fmt.Sprintf("x%.2f", f)
}

func dur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func mem(b uint64) string {
	if b == 0 {
		return "-"
	}
	return humanize.IBytes(b)
}

// WriteSVG writes a grouped bar chart: for each set, pp and tg speed as a
// fraction of the first set's (so both fit one axis), labelled with the
// absolute value. Hand-written: a few rectangles need no chart library.
func WriteSVG(w io.Writer, title string, rs []Result) error {
	const (
		width, rowH, left, top, barH = 900, 46, 180, 40, 16
		plotW                        = width - left - 220
	)
	maxRatio := 1.0
	for _, r := range rs {
		maxRatio = max(maxRatio, r.PPRatio, r.TGRatio)
	}
	height := top + rowH*len(rs) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%d" y="34" fill="#555">speed relative to the first set (pp blue, tg orange)</text>`+"\n", left)
	x1 := left + int(float64(plotW)/maxRatio)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-dasharray="4 3"/>`+"\n", x1, top, x1, top+rowH*len(rs))
	for i, r := range rs {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH+4, html.EscapeString(r.Set.Name))
		for j, v := range []struct {
			ratio, abs float64
			color, lab string
		}{{r.PPRatio, r.PP, "#3b6fb6", "pp"}, {r.TGRatio, r.TG, "#e08a2c", "tg"}} {
			yy := y + j*(barH+2)
			wd := int(float64(plotW) * v.ratio / maxRatio)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", left, yy, max(wd, 1), barH, v.color)
			label := v.lab + " -"
			if v.abs > 0 {
				label = fmt.Sprintf("%s %.1f t/s (x%.2f)", v.lab, v.abs, v.ratio)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+max(wd, 1)+4, yy+barH-4, html.EscapeString(label))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
