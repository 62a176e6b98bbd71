package bench

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// speedTests lists the report's speed test names in order.
func (rep *Report) speedTests() []string {
	seen := map[string]bool{}
	for _, d := range rep.Devices {
		for k := range d.DeviceSpeed {
			seen[k] = true
		}
		for k := range d.Served {
			seen[k] = true
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b string) int {
		if a[:2] != b[:2] {
			return strings.Compare(a[:2], b[:2]) // pp before tg
		}
		var x, y int
		fmt.Sscanf(a[2:], "%d", &x)
		fmt.Sscanf(b[2:], "%d", &y)
		return x - y
	})
	return out
}

func na(v float64, format string) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

// WriteTable writes the human-readable result.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	tests := rep.speedTests()
	fmt.Fprintf(w, "model %s (%.1f MiB), llama-server %s\nsettings: %s\nload average %.1f at the start, %.1f at the end\n",
		rep.Model, rep.ModelMiB, rep.ServerVersion, rep.Settings, rep.LoadAvg[0], rep.LoadAvg[1])
	fmt.Fprintf(w, "speeds: the device's own, measured by the tool in \"speed from\" (medians of %d rounds); served speeds and\nllama-server's per-token overhead are listed under the table; time to verdict is the server's\n\n", rep.Reps)
	fmt.Fprint(tw, "device\tspeed from\t")
	for _, t := range tests {
		fmt.Fprintf(tw, "%s t/s\t", t)
	}
	fmt.Fprint(tw, "verdict ms\tCPU busy %\tserver cores\tpower W\ttok/J\tmain share\tfallback/restart ms\tratio\t\n")
	for _, d := range rep.Devices {
		src := d.SpeedSource
		if src == "" {
			src = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t", d.Device, src)
		for _, t := range tests {
			s, ok := d.DeviceSpeed[t]
			if !ok {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%.0f\t", s.Median)
		}
		load := "n/a"
		if d.Load.SystemPct >= 0 && d.VerdictMS.N > 0 {
			load = fmt.Sprintf("%.0f", d.Load.SystemPct)
		}
		cores := "n/a"
		if d.Load.ServerCores >= 0 && d.VerdictMS.N > 0 {
			cores = fmt.Sprintf("%.2f", d.Load.ServerCores)
		}
		rec := "n/a"
		if d.RecoveryTested {
			rec = fmt.Sprintf("%s/%.0f (%d lost)", na(d.RecoveryMS, "%.0f"), d.RestartMS, d.RecoveryLost)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2fx\t\n", na(d.VerdictMS.Median, "%.1f"), load, cores,
			na(d.Power.Watts, "%.1f"), na(d.TokPerJoule, "%.1f"), na(d.MainShare, "%.2f"), rec, d.Ratio)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, d := range rep.Devices {
		fmt.Fprintf(w, "%-8s %s", d.Device, d.Interpretation)
		if d.Device != "CPU" && d.Interpretation != "error" {
			fmt.Fprintf(w, " (time to verdict %.2fx, tg64 %.2fx the CPU)", d.Ratio, d.TGRatio)
		}
		fmt.Fprintln(w)
		if d.Error != "" {
			fmt.Fprintf(w, "         error: %s\n", d.Error)
		}
		if d.Build != "" {
			fmt.Fprintf(w, "         server %s (build %s)\n", d.Source, d.Build)
		}
		if len(d.Skipped) > 0 {
			fmt.Fprintf(w, "         skipped: %s\n", strings.Join(d.Skipped, ", "))
		}
		for _, l := range rep.servedLines(d, tests) {
			fmt.Fprintf(w, "         %s\n", l)
		}
		for _, l := range d.Implausible {
			fmt.Fprintf(w, "         left out: %s\n", l)
		}
	}
	switch n := len(rep.Stability); {
	case n >= minStabilityStarts:
		fmt.Fprintf(w, "\nselection over %d fresh starts: %s (stable: %v)\n", n, strings.Join(rep.Stability, ", "), rep.Stable)
	case n > 0:
		fmt.Fprintf(w, "\nselection from %d fresh start: %s (stability needs %d starts or more; not judged)\n", n, strings.Join(rep.Stability, ", "), minStabilityStarts)
	}
	if rep.MainAloneTokS > 0 {
		fmt.Fprintf(w, "main model alone: %.0f tok/s (tg64); main share = its speed with the guard busy / alone\n", rep.MainAloneTokS)
	}
	if len(rep.Devices) > 0 && rep.Devices[0].RecoveryTested {
		fmt.Fprintln(w, "fallback/restart: kill -9 of the guard's server -> next verdict (hot CPU standby), -> the device serving again")
	}
	rep.writeGuardRows(w)
	_, err := fmt.Fprintf(w, "\nrecommendation: guard on %s: %s\n", rep.Recommendation, rep.Reason)
	return err
}

// servedLines describe what llama-server delivered on d next to the
// device's own speed.
func (rep *Report) servedLines(d DeviceResult, tests []string) []string {
	if len(d.Served) == 0 {
		return nil
	}
	if d.SpeedSource != SourceLlamaBench {
		why := "no llama-bench"
		if d.LlamaBenchError != "" {
			why = "llama-bench failed: " + d.LlamaBenchError
		}
		return []string{fmt.Sprintf("speeds are llama-server's own timings (%s)", why)}
	}
	var served, share, over []string
	for _, t := range tests {
		if sv, ok := d.Served[t]; ok {
			served = append(served, fmt.Sprintf("%s %.0f", t, sv.Median))
		}
		if v, ok := d.ServedShare[t]; ok {
			share = append(share, fmt.Sprintf("%s %.0f%%", t, 100*v))
		}
		if v, ok := d.ServerOverheadUS[t]; ok {
			over = append(over, fmt.Sprintf("%s %+.0f µs (±%.0f)", t, v, d.ServerOverheadNoiseUS[t]))
		}
	}
	out := []string{"served by llama-server (its own timings, medians, t/s): " + strings.Join(served, ", ")}
	if len(share) > 0 {
		l := "served / device speed (fastest round of each): " + strings.Join(share, ", ")
		if len(over) > 0 {
			l += "; server overhead per token (± llama-bench's own spread): " + strings.Join(over, ", ")
		}
		out = append(out, l)
	}
	return out
}

// chart is one horizontal bar chart of the SVG report.
type chart struct {
	title string
	unit  string
	vals  []float64
}

func (rep *Report) charts() []chart {
	var cs []chart
	get := func(f func(DeviceResult) float64) []float64 {
		v := make([]float64, len(rep.Devices))
		for i, d := range rep.Devices {
			v[i] = f(d)
		}
		return v
	}
	// The device speeds' source, when every device has the same one.
	src := ""
	for i, d := range rep.Devices {
		if i == 0 || d.SpeedSource == src {
			src = d.SpeedSource
		} else {
			src = "per device, see the table"
			break
		}
	}
	for _, t := range rep.speedTests() {
		cs = append(cs,
			chart{fmt.Sprintf("%s, device speed (%s)", t, src), "tok/s", get(func(d DeviceResult) float64 { return d.DeviceSpeed[t].Median })},
			chart{t + ", served (llama-server timings)", "tok/s", get(func(d DeviceResult) float64 { return d.Served[t].Median })})
	}
	cs = append(cs,
		chart{"time to verdict (lower is better)", "ms", get(func(d DeviceResult) float64 { return d.VerdictMS.Median })},
		chart{"machine CPU busy while the guard answers", "%", get(func(d DeviceResult) float64 { return d.Load.SystemPct })},
		chart{"main model speed with the guard busy, share of alone", "x", get(func(d DeviceResult) float64 { return d.MainShare })},
		chart{"verdict speed ratio vs CPU", "x", get(func(d DeviceResult) float64 { return d.Ratio })},
	)
	return cs
}

var barColors = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948"}

// WriteSVG writes the charts as one hand-written SVG document.
func (rep *Report) WriteSVG(w io.Writer) error {
	const width, left, barH, gap = 720, 110, 18, 6
	cs := rep.charts()
	n := len(rep.Devices)
	chartH := 28 + n*(barH+gap) + 10
	height := 60 + len(cs)*chartH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="16" font-weight="bold">aegis bench sentinel: %s</text>`+"\n", html.EscapeString(rep.Recommendation))
	fmt.Fprintf(&b, `<text x="10" y="42">%s</text>`+"\n", html.EscapeString(rep.Reason))
	y := 60
	for _, c := range cs {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+14, html.EscapeString(c.title))
		maxV := 0.0
		for _, v := range c.vals {
			maxV = max(maxV, v)
		}
		for i, v := range c.vals {
			by := y + 24 + i*(barH+gap)
			fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`, by+13, html.EscapeString(rep.Devices[i].Device))
			bw := 0
			if maxV > 0 && v > 0 {
				bw = int(float64(width-left-120) * v / maxV)
			}
			label := "n/a"
			if v > 0 {
				label = fmt.Sprintf("%.4g %s", v, c.unit)
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
				left, by, bw, barH, barColors[i%len(barColors)], left+bw+6, by+13, html.EscapeString(label))
		}
		y += chartH
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteHTML writes a self-contained page: the table and the SVG charts.
func (rep *Report) WriteHTML(w io.Writer) error {
	var table, svg strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		return err
	}
	if err := rep.WriteSVG(&svg); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, `<!doctype html>
<html><head><meta charset="utf-8"><title>aegis bench sentinel</title>
<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em;overflow:auto}</style></head>
<body><h1>Where should the guard run?</h1>
<p><b>Recommendation: %s</b> — %s</p>
<pre>%s</pre>
%s
</body></html>
`, html.EscapeString(rep.Recommendation), html.EscapeString(rep.Reason), html.EscapeString(table.String()), svg.String())
	return err
}
