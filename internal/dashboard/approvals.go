package dashboard

import (
	"encoding/json"
	"errors"
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
	writeJSON(w, http.StatusOK, map[string]any{"enabled": true, "approvals": d.Approvals.Pending()})
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
		rec, err := d.Approvals.Decide(r.PathValue("id"), dec)
		switch {
		case errors.Is(err, approval.ErrNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case errors.Is(err, approval.ErrUnbound):
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, rec)
		}
	}
}
