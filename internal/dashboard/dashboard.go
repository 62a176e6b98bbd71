// Package dashboard serves Aegis's live dashboard at /ui: a stream of
// requests with their verdicts, a latency chart, failures by reason, guard
// device status and the recent incidents with their failing spans
// highlighted.
//
// Everything the page needs is embedded in the binary (HTML, CSS and a
// small vanilla-JS file; no CDN, no web fonts), so it works offline. The
// page is fed by server-sent events from /ui/events and reads incidents
// from /ui/api/incidents. Only loopback clients are answered by default,
// and requests whose Host is a DNS name other than localhost are refused
// unless allowed, so a web page cannot reach the dashboard through DNS
// rebinding.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"github.com/aegis-sentinel/aegis/internal/approval"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

//go:embed static
var staticFS embed.FS

// Incidents is what the dashboard needs from the incident log;
// *store.Store implements it.
type Incidents interface {
	List(ctx context.Context, f store.Filter) ([]store.Incident, error)
}

// Sizes of the dashboard's buffers.
const (
	// RingSize is how many recent events a newly opened page replays.
	RingSize = 1000
	// clientBuffer is how many messages a page may lag behind before it is
	// disconnected (its EventSource reconnects and resyncs from a snapshot).
	clientBuffer = 1024
	// MaxStreams caps the open event streams (pages), so a runaway script
	// cannot pin unbounded memory.
	MaxStreams = 64
)

// Dashboard is an http.Handler for /ui and everything under it.
type Dashboard struct {
	// Approvals, when set, are the tool calls held for a person: the page
	// lists them and approves or denies them (this gateway's queue, or a
	// fleet's desk, which shows every gateway's).
	Approvals approval.Desk
	// Heartbeat is how often an idle event stream sends a comment line;
	// zero means 15 s.
	Heartbeat time.Duration
	// AllowHosts lists extra Host names (beyond localhost and IP
	// literals) the dashboard answers, for a deliberate remote setup.
	AllowHosts []string
	// AllowRemote lets clients other than loopback ones in. By default
	// the dashboard answers only loopback peers, even when the server
	// listens more widely: incidents may hold output text.
	AllowRemote bool
	// Fleet, when set, returns the whole fleet (gateways with their
	// totals, guard workers) for GET /ui/api/fleet and the page's fleet
	// panel; nil answers {"enabled": false} there (a gateway on its own).
	Fleet func() any
	// Gateway is the name this gateway records its incidents under.
	// Several gateways may share one incident log; the incident panel
	// lists this one's unless asked for ?gateway=* (every gateway's) or
	// another name.
	Gateway string
	// Config, when set, returns the state of the configuration (files,
	// when it loaded, reloads and the last refused one) for GET
	// /ui/api/config and the page's configuration line; nil answers
	// {"enabled": false} there.
	Config func() any

	incidents Incidents
	sub       *events.Subscription
	mux       *http.ServeMux

	mu       sync.Mutex
	seq      uint64
	ring     []wireEvent // a ring of RingSize; ring[head] is the oldest once full
	head     int
	totals   Totals
	inFlight map[string]struct{}
	// failed holds the reasons each request in flight failed for; they
	// count in Totals.Reasons once per request when it finishes.
	failed  map[string]map[string]struct{}
	guards  map[string]*Guard
	clients map[chan message]struct{}
	closed  bool
}

// wireEvent is an event as the page sees it: numbered, without output text.
type wireEvent struct {
	Seq uint64 `json:"seq"`
	events.Event
}

// Totals are the counters the page shows in its header and reason chart.
type Totals struct {
	Outcomes map[string]int64 `json:"outcomes"`
	Reasons  map[string]int64 `json:"reasons"`
	InFlight int              `json:"in_flight"`
}

// Guard is what the page shows for one guard device: its own state and,
// when its supervisor serves from it as the fallback (the preferred
// device is down), Fallback.
type Guard struct {
	State    string    `json:"state,omitempty"`
	Fallback bool      `json:"fallback,omitempty"`
	Child    string    `json:"child,omitempty"`
	Error    string    `json:"error,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	Calls    int64     `json:"calls,omitempty"`
	Failures int64     `json:"failures,omitempty"`
	LastNS   int64     `json:"last_ns,omitempty"`
}

type message struct {
	event string
	data  []byte
}

// New subscribes to bus and returns the dashboard. incidents may be nil
// (the incident panel then stays empty). Call Run to consume events and
// Close before shutting the HTTP server down.
func New(bus *events.Bus, incidents Incidents) *Dashboard {
	d := &Dashboard{
		incidents: incidents,
		sub:       bus.Subscribe(4096),
		totals:    Totals{Outcomes: map[string]int64{}, Reasons: map[string]int64{}},
		inFlight:  map[string]struct{}{},
		failed:    map[string]map[string]struct{}{},
		guards:    map[string]*Guard{},
		clients:   map[chan message]struct{}{},
	}
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/ui/", http.FileServerFS(static))
	d.mux = http.NewServeMux()
	d.mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	d.mux.HandleFunc("GET /ui/events", d.serveEvents)
	d.mux.HandleFunc("GET /ui/api/incidents", d.serveIncidents)
	d.mux.HandleFunc("GET /ui/api/fleet", d.serveFleet)
	d.mux.HandleFunc("GET /ui/api/config", d.serveConfig)
	d.mux.HandleFunc("GET /ui/api/approvals", d.serveApprovals)
	d.mux.HandleFunc("POST /ui/api/approvals/{id}/approve", d.serveDecision(true))
	d.mux.HandleFunc("POST /ui/api/approvals/{id}/deny", d.serveDecision(false))
	d.mux.Handle("GET /ui/", staticFiles(files))
	return d
}

// ServeHTTP serves /ui, /ui/events and /ui/api/incidents.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !d.AllowRemote && !loopbackPeer(r.RemoteAddr) {
		http.Error(w, "dashboard: loopback clients only (use an SSH tunnel to reach it remotely)", http.StatusForbidden)
		return
	}
	if !d.hostAllowed(r.Host) {
		http.Error(w, "dashboard: host not allowed (DNS rebinding protection); use localhost or an IP address", http.StatusForbidden)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	d.mux.ServeHTTP(w, r)
}

// staticFiles answers 404, not 500, for paths no embedded file can have
// (invalid UTF-8 such as overlong-encoded dots, NUL bytes).
func staticFiles(files http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.Trim(strings.TrimPrefix(r.URL.Path, "/ui/"), "/")
		if name != "" && !fs.ValidPath(name) || strings.ContainsRune(name, 0) {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}

func loopbackPeer(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (d *Dashboard) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "" || strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil {
		return true
	}
	for _, a := range d.AllowHosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// Run applies bus events until ctx is done, then closes every stream.
func (d *Dashboard) Run(ctx context.Context) {
	defer d.Close()
	for {
		select {
		case e, ok := <-d.sub.C:
			if !ok {
				return
			}
			d.Observe(e)
		case <-ctx.Done():
			return
		}
	}
}

// fail notes that request id failed for reason (once per request).
func (d *Dashboard) fail(id, reason string) {
	rs := d.failed[id]
	if rs == nil {
		rs = map[string]struct{}{}
		d.failed[id] = rs
	}
	rs[reason] = struct{}{}
}

// Close ends every open event stream (so http.Server.Shutdown does not
// wait on them) and unsubscribes. It is safe to call twice.
func (d *Dashboard) Close() {
	d.sub.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for c := range d.clients {
		close(c)
		delete(d.clients, c)
	}
}

// Observe applies one event and pushes it to every open page.
func (d *Dashboard) Observe(e events.Event) {
	e.Text = "" // outputs stay in the incident log, which honours the config
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	we := wireEvent{Seq: d.seq, Event: e}
	if len(d.ring) < RingSize {
		d.ring = append(d.ring, we)
	} else {
		d.ring[d.head] = we
		d.head = (d.head + 1) % RingSize
	}
	d.broadcast("event", we)

	totalsChanged, guardsChanged := false, false
	switch e.Kind {
	case events.RequestStarted:
		d.inFlight[e.RequestID] = struct{}{}
		totalsChanged = true
	case events.RequestFinished:
		delete(d.inFlight, e.RequestID)
		outcome := e.Outcome
		if outcome == "" {
			outcome = "released"
		}
		d.totals.Outcomes[outcome]++
		for r := range d.failed[e.RequestID] {
			d.totals.Reasons[r]++
		}
		delete(d.failed, e.RequestID)
		totalsChanged = true
	case events.Halt:
		if e.Verdict != nil && e.Verdict.Reason != "" {
			d.fail(e.RequestID, string(e.Verdict.Reason)) // blocks and unreachable upstreams have no Verdict event
		}
	case events.Verdict:
		if e.GuardDevice != "" {
			g := d.guard(e.GuardDevice)
			g.Calls++
			g.LastNS = int64(e.Duration)
			if e.Error != "" {
				g.Failures++
			}
			guardsChanged = true
		} else if e.Verdict != nil && e.Verdict.Verdict == validator.Fail {
			d.fail(e.RequestID, string(e.Verdict.Reason))
		}
	case events.GuardStatus:
		guardsChanged = d.guardStatus(e)
	}
	if len(d.inFlight) > 100_000 { // finish events lost; do not grow forever
		clear(d.inFlight)
	}
	if len(d.failed) > 100_000 {
		clear(d.failed)
	}
	d.totals.InFlight = len(d.inFlight)
	if totalsChanged {
		d.broadcast("totals", d.totals)
	}
	if guardsChanged {
		d.broadcast("guards", d.guards)
	}
}

// guardStatus applies a supervisor's GuardStatus event (see package
// supervisor): a device's own state; the supervisor's state with no device
// serving (starting, restarting, deterministic-only), shown under the
// supervisor's name until a device reports again; or its "fallback" state
// naming the device it serves from, a mark on that device's row (the
// device's own state stays), cleared when another of its devices is ready.
// Called with d.mu held.
func (d *Dashboard) guardStatus(e events.Event) bool {
	switch {
	case e.GuardDevice == "" && e.Upstream == "":
		return false
	case e.GuardDevice == "":
		g := d.guard(e.Upstream)
		g.State, g.Child, g.Error, g.Since = e.GuardState, e.Upstream, e.Error, e.Time
		return true
	}
	if e.Upstream != "" {
		delete(d.guards, e.Upstream) // a device reports: the no-device row is over
	}
	g := d.guard(e.GuardDevice)
	g.Child = cmpOr(e.Upstream, g.Child)
	if e.GuardState == "fallback" {
		g.Fallback = true
		if g.State == "" {
			g.State = "ready" // it serves
		}
		return true
	}
	if g.State != e.GuardState || e.Error != "" {
		g.State, g.Error, g.Since = e.GuardState, e.Error, e.Time
	}
	g.Fallback = g.Fallback && e.GuardState == "ready"
	if e.GuardState == "ready" {
		for dev, o := range d.guards {
			if dev != e.GuardDevice && o.Child == g.Child {
				o.Fallback = false // the preferred device serves again
			}
		}
	}
	return true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (d *Dashboard) guard(device string) *Guard {
	g := d.guards[device]
	if g == nil {
		g = &Guard{}
		d.guards[device] = g
	}
	return g
}

// IncidentAdded pushes a newly stored incident to every open page. Wire it
// to store.Recorder.OnAdd.
func (d *Dashboard) IncidentAdded(inc store.Incident) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.broadcast("incident", withSegments(inc))
}

// broadcast sends to every page without blocking; a page that lags is
// dropped and reconnects. Called with d.mu held.
func (d *Dashboard) broadcast(event string, v any) {
	if len(d.clients) == 0 {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	m := message{event: event, data: data}
	for c := range d.clients {
		select {
		case c <- m:
		default:
			close(c)
			delete(d.clients, c)
		}
	}
}

type snapshot struct {
	Seq    uint64            `json:"seq"`
	Events []wireEvent       `json:"events"`
	Totals Totals            `json:"totals"`
	Guards map[string]*Guard `json:"guards"`
}

func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	d.mu.Lock()
	if d.closed || len(d.clients) >= MaxStreams {
		d.mu.Unlock()
		http.Error(w, "dashboard closed or too many open pages", http.StatusServiceUnavailable)
		return
	}
	recent := append(append(make([]wireEvent, 0, len(d.ring)), d.ring[d.head:]...), d.ring[:d.head]...)
	snap, err := json.Marshal(snapshot{Seq: d.seq, Events: recent, Totals: d.totals, Guards: d.guards})
	c := make(chan message, clientBuffer)
	d.clients[c] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if _, ok := d.clients[c]; ok {
			delete(d.clients, c)
			close(c)
		}
		d.mu.Unlock()
	}()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := writeSSE(w, message{event: "snapshot", data: snap}); err != nil {
		return
	}
	flusher.Flush()

	beat := d.Heartbeat
	if beat <= 0 {
		beat = 15 * time.Second
	}
	tick := time.NewTicker(beat)
	defer tick.Stop()
	for {
		select {
		case m, ok := <-c:
			if !ok {
				return
			}
			if err := writeSSE(w, m); err != nil {
				return
			}
			// Send what else is queued before flushing once.
			for drained := false; !drained; {
				select {
				case m, ok := <-c:
					if !ok {
						flusher.Flush()
						return
					}
					if err := writeSSE(w, m); err != nil {
						return
					}
				default:
					drained = true
				}
			}
			flusher.Flush()
		case <-tick.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func writeSSE(w http.ResponseWriter, m message) error {
	// JSON never contains a raw newline, so one data line suffices.
	_, err := w.Write([]byte("event: " + m.event + "\ndata: " + string(m.data) + "\n\n"))
	return err
}

// incidentView is an incident with its text cut into marked segments.
type incidentView struct {
	store.Incident
	Segments []store.Segment `json:"segments,omitempty"`
}

func withSegments(inc store.Incident) incidentView {
	v := incidentView{Incident: inc}
	if inc.HasText {
		v.Segments = store.Segments(inc.Text, inc.Findings)
	}
	return v
}

func (d *Dashboard) serveFleet(w http.ResponseWriter, r *http.Request) {
	if d.Fleet == nil {
		writeJSON(w, http.StatusOK, map[string]bool{"enabled": false})
		return
	}
	writeJSON(w, http.StatusOK, d.Fleet())
}

func (d *Dashboard) serveConfig(w http.ResponseWriter, r *http.Request) {
	if d.Config == nil {
		writeJSON(w, http.StatusOK, map[string]bool{"enabled": false})
		return
	}
	writeJSON(w, http.StatusOK, d.Config())
}

func (d *Dashboard) serveIncidents(w http.ResponseWriter, r *http.Request) {
	f := store.Filter{Limit: 50}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit must be a positive integer"})
			return
		}
		f.Limit = min(n, 500)
	}
	if s := r.URL.Query().Get("reason"); s != "" {
		if !validator.Reason(s).Valid() {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unknown reason " + strconv.Quote(s)})
			return
		}
		f.Reason = validator.Reason(s)
	}
	switch gw := r.URL.Query().Get("gateway"); gw {
	case "":
		f.Gateway = d.Gateway
	case "*":
	default:
		f.Gateway = gw
	}
	out := struct {
		Gateway   string         `json:"gateway,omitempty"` // this gateway's name
		Incidents []incidentView `json:"incidents"`
	}{Gateway: d.Gateway, Incidents: []incidentView{}}
	if d.incidents != nil {
		list, err := d.incidents.List(r.Context(), f)
		if err != nil && !errors.Is(err, context.Canceled) {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		for _, inc := range list {
			out.Incidents = append(out.Incidents, withSegments(inc))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
