package reveal

import (
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// MaxBlob bounds the base64 a blob decoder reads (in characters); the
// rest of a longer blob is not decoded.
const MaxBlob = 1 << 20

// Blob decodes a base64 blob (an MCP resource's or content item's "blob"
// or "data") and returns its text when it is text: valid UTF-8, mostly
// printable. Binary data (images, archives) returns false. Whitespace
// inside the blob (line-wrapped base64) is ignored.
func Blob(b64 string) (string, bool) {
	if len(b64) > MaxBlob {
		b64 = b64[:MaxBlob]
	}
	b64 = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, b64)
	if b64 == "" {
		return "", false
	}
	return textnorm.DecodeBase64(b64)
}

// TextMIME reports whether a MIME type names text a model reads (text/*,
// JSON, XML, YAML, JavaScript and the like); an empty type is unknown and
// counts as text, so its blob is decoded and judged when it decodes to
// text.
func TextMIME(mime string) bool {
	mime = strings.ToLower(strings.TrimSpace(mime))
	if i := strings.IndexByte(mime, ';'); i >= 0 {
		mime = strings.TrimSpace(mime[:i])
	}
	if mime == "" || strings.HasPrefix(mime, "text/") {
		return true
	}
	for _, s := range []string{"json", "xml", "yaml", "javascript", "ecmascript", "x-sh", "toml", "csv", "markdown", "html"} {
		if strings.Contains(mime, s) {
			return true
		}
	}
	return false
}
