package gateway

import "net/http"

// HeaderShouldRetry tells a client whether to send the request again. The
// openai SDKs obey it before their own status rules; every halt says
// "false", since the gateway has already made the retries the policy
// allows and the same request would meet the same checks.
const HeaderShouldRetry = "X-Should-Retry"

// markFinal marks a response as a final answer not to be retried. It must
// be called before the status line is written (on a stream whose header
// is already out, the status is 200 and no client retries it anyway).
func markFinal(h http.Header) { h.Set(HeaderShouldRetry, "false") }
