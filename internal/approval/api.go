package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/events"
)

// Path is where the approvals API is served.
const Path = "/aegis/approvals"

// maxDecisionBytes bounds a decision's body.
const maxDecisionBytes = 4 << 10

// Handler serves the approvals API over d (the caller puts it behind the
// gateway's token): a Queue's desk, or a fleet's, which lists and decides
// every gateway's held calls:
//
//	GET  /aegis/approvals               {"approvals": [record...]}, oldest first
//	GET  /aegis/approvals/{id}          one pending record
//	POST /aegis/approvals/{id}/approve  {"args_hash": ..., "policy_version": ..., "by": ...}
//	POST /aegis/approvals/{id}/deny     {"by": ...} (optional)
//
// A decision answers 200 with the decided record; 404 when the call is
// not pending; 409 when the approval names other arguments or another
// policy version, the policy was reloaded (the call is then denied) or
// another decision came first; 400 for a body that is not such an object;
// 503 when a fleet's shared store cannot be reached.
func Handler(d Desk) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		recs, err := d.Pending(r.Context())
		if err != nil {
			writeErr(w, Status(err), err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"approvals": recs})
	})
	mux.HandleFunc("GET "+Path+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec, err := d.Lookup(r.Context(), r.PathValue("id"))
		if err != nil {
			writeErr(w, Status(err), err)
			return
		}
		writeJSON(w, http.StatusOK, rec)
	})
	decide := func(approve bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var dec Decision
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDecisionBytes))
			if err != nil {
				writeErr(w, http.StatusBadRequest, fmt.Errorf("decision body: %w", err))
				return
			}
			if len(bytes.TrimSpace(body)) > 0 {
				jd := json.NewDecoder(bytes.NewReader(body))
				jd.DisallowUnknownFields()
				if err := jd.Decode(&dec); err != nil {
					writeErr(w, http.StatusBadRequest, fmt.Errorf("decision body: want {\"args_hash\", \"policy_version\", \"by\"}: %w", err))
					return
				}
			}
			dec.Approve = approve
			if dec.By == "" {
				dec.By = "api"
			}
			rec, err := d.Decide(r.Context(), r.PathValue("id"), dec)
			if err != nil {
				writeErr(w, Status(err), err)
				return
			}
			writeJSON(w, http.StatusOK, rec)
		}
	}
	mux.HandleFunc("POST "+Path+"/{id}/approve", decide(true))
	mux.HandleFunc("POST "+Path+"/{id}/deny", decide(false))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeErr(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// Client talks to a running gateway's approvals API.
type Client struct {
	// Base is the gateway's URL ("http://127.0.0.1:8080").
	Base string
	// Token is the gateway's bearer token, if it has one.
	Token string
	HTTP  *http.Client
}

// List returns the pending approvals.
func (c *Client) List(ctx context.Context) ([]events.ApprovalRecord, error) {
	var out struct {
		Approvals []events.ApprovalRecord `json:"approvals"`
	}
	err := c.do(ctx, http.MethodGet, Path, nil, &out)
	return out.Approvals, err
}

// Get returns one pending approval.
func (c *Client) Get(ctx context.Context, id string) (events.ApprovalRecord, error) {
	var rec events.ApprovalRecord
	err := c.do(ctx, http.MethodGet, Path+"/"+id, nil, &rec)
	return rec, err
}

// Approve approves the pending call id, bound to the arguments and policy
// version it shows now.
func (c *Client) Approve(ctx context.Context, rec events.ApprovalRecord, by string) (events.ApprovalRecord, error) {
	var out events.ApprovalRecord
	d := Decision{ArgsHash: rec.ArgsHash, PolicyVersion: rec.PolicyVersion, By: by}
	err := c.do(ctx, http.MethodPost, Path+"/"+rec.ID+"/approve", d, &out)
	return out, err
}

// Deny denies the pending call id.
func (c *Client) Deny(ctx context.Context, id, by string) (events.ApprovalRecord, error) {
	var out events.ApprovalRecord
	err := c.do(ctx, http.MethodPost, Path+"/"+id+"/deny", Decision{By: by}, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, body)
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("approvals: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg = "the gateway wants its token (--token-file or AEGIS_AUTH_TOKEN)"
		}
		return fmt.Errorf("approvals: %s %s: %d: %s", method, path, resp.StatusCode, msg)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("approvals: the gateway's answer is not an approvals record: %w", err)
	}
	return nil
}
