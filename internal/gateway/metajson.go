package gateway

import (
	"encoding/json"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// appendMeta appends m encoded as json.Marshal encodes it, false when
// that fails. The common verdict (no findings, plain strings) is written
// directly; anything else goes through encoding/json.
func appendMeta(dst []byte, m *meta) ([]byte, bool) {
	v := &m.Verdict
	risk := v.Risk.String()
	if len(v.Findings) > 0 || !plainJSON(v.ID) || !plainJSON(string(v.Verdict)) || !plainJSON(risk) ||
		!plainJSON(string(v.Reason)) || !plainJSON(string(v.Action)) || !plainJSON(v.Error) || !plainJSON(m.RequestID) || !plainReasons(m.Repaired) {
		mb, err := json.Marshal(m)
		if err != nil {
			return dst, false
		}
		return append(dst, mb...), true
	}
	dst = append(dst, '{')
	if v.ID != "" {
		dst = appendPlain(append(dst, `"id":`...), v.ID)
		dst = append(dst, ',')
	}
	dst = appendPlain(append(dst, `"verdict":`...), string(v.Verdict))
	dst = appendPlain(append(dst, `,"risk":`...), risk)
	if v.Reason == validator.ReasonNone {
		dst = append(dst, `,"reason":null`...)
	} else {
		dst = appendPlain(append(dst, `,"reason":`...), string(v.Reason))
	}
	dst = appendPlain(append(dst, `,"action":`...), string(v.Action))
	if v.Findings == nil {
		dst = append(dst, `,"findings":null`...)
	} else {
		dst = append(dst, `,"findings":[]`...)
	}
	if v.Error != "" {
		dst = appendPlain(append(dst, `,"error":`...), v.Error)
	}
	dst = appendPlain(append(dst, `,"request_id":`...), m.RequestID)
	dst = strconv.AppendInt(append(dst, `,"attempts":`...), int64(m.Attempts), 10)
	if len(m.Repaired) > 0 {
		dst = append(dst, `,"repaired":[`...)
		for i, r := range m.Repaired {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPlain(dst, string(r))
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), true
}

// plainJSON reports whether json.Marshal writes s as itself in quotes:
// printable ASCII with nothing it escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func appendPlain(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func plainReasons(rs []validator.Reason) bool {
	for _, r := range rs {
		if !plainJSON(string(r)) {
			return false
		}
	}
	return true
}
