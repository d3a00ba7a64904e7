package fake

import (
	"net/http"
	"strings"
)

// vertexVersion is the anthropic_version Vertex AI documents.
const vertexVersion = "vertex-2023-10-16"

// checkBearer checks a Google Cloud request's OAuth token: Authorization:
// Bearer <token>, not verified.
func checkBearer(h http.Header) *Outcome {
	if scheme, tok, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " "); ok &&
		strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != "" {
		return nil
	}
	o := Status(401).Message("Request is missing required authentication credential. Expected OAuth 2 access token, " +
		"login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
	o.platform = true
	return &o
}

// rejectVertex checks a rawPredict or streamRawPredict request: a Bearer
// token, then an Anthropic Messages body with anthropic_version (a model
// in the body is ignored: the path names it).
func rejectVertex(h http.Header, r request, maxOut func(string) int, c *carried) *Outcome {
	if o := checkBearer(h); o != nil {
		return o
	}
	if r.err != nil {
		o := Status(400).Message("Invalid JSON payload received. " + r.err.Error())
		o.platform = true
		return &o
	}
	if o := anthropicVersionField(r, vertexVersion); o != nil {
		return o
	}
	return checkAnthropicBody(platformBody(r), maxOut, c)
}

// vertexError is the error body Vertex sends for an Anthropic model when it
// is Vertex's own: google.rpc.Status for authentication, permission, a
// missing model, the rate limit (429 RESOURCE_EXHAUSTED with RetryInfo)
// and the platform's request checks. ok is false for the errors Vertex
// passes through from Anthropic in Anthropic's error body.
func vertexError(o Outcome, ex exchange) (status int, body []byte, ok bool) {
	status = errorStatus(o, Vertex)
	switch {
	case o.platform, status == 401, status == 403, status == 404,
		status == 429 && o.preset != presetSpendCap:
		status, body, _ = googleError(o, ex)
		return status, body, true
	}
	return 0, nil, false
}
