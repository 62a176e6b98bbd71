package dashboard

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/aegis-sentinel/aegis/internal/approval"
)

// serveApprovals lists the tool calls held for a person (GET
// /ui/api/approvals): tools, argument paths and the rule, never values.
func (d *Dashboard) serveApprovals(w http.ResponseWriter, r *http.Request) {
	if d.Approvals == nil {
		writeJSON(w, http.StatusOK, map[string]any{"enabled": false, "approvals": []any{}})
		return
	}
	recs, err := d.Approvals.Pending(r.Context())
	if err != nil {
		writeJSON(w, approval.Status(err), map[string]any{"enabled": true, "approvals": []any{}, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"enabled": true, "approvals": recs})
}

// serveDecision approves or denies a held call from the page (POST
// /ui/api/approvals/{id}/approve|deny). The body must be JSON (a form
// from another site cannot send it without a CORS preflight) and an
// approval names the args_hash and policy_version the page showed.
func (d *Dashboard) serveDecision(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d.Approvals == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "approvals are not configured"})
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a decision is a JSON POST from the dashboard page"})
			return
		}
		var dec approval.Decision
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
		if err == nil {
			err = json.Unmarshal(b, &dec)
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "decision body: " + err.Error()})
			return
		}
		dec.Approve, dec.By = approve, "dashboard"
		rec, err := d.Approvals.Decide(r.Context(), r.PathValue("id"), dec)
		if err != nil {
			writeJSON(w, approval.Status(err), map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, rec)
	}
}

// ApprovalsChanged tells every open page to reload its pending approvals:
// a fleet calls it when another gateway holds or ends a call, which this
// gateway's events do not show.
func (d *Dashboard) ApprovalsChanged() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.broadcast("approvals", struct{}{})
}
