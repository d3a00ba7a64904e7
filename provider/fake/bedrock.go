package fake

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// defaultRegion is the AWS region a Server expects in SigV4 credential
// scopes until Region sets another.
const defaultRegion = "us-east-1"

// Region sets the AWS region the fake's Bedrock endpoint serves: a
// request's SigV4 credential scope must name it (by default us-east-1). An
// empty region restores the default.
func (s *Server) Region(region string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awsRegion = region
}

func (s *Server) region() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.awsRegion == "" {
		return defaultRegion
	}
	return s.awsRegion
}

// bedrockVersion is the anthropic_version Bedrock documents.
const bedrockVersion = "bedrock-2023-05-31"

// sigV4 matches the shape of a SigV4 Authorization header.
var sigV4 = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$`)

// awsError is a Bedrock error: its x-amzn-ErrorType and message, with the
// status set by the caller.
func awsError(status int, typ, msg string) *Outcome {
	o := Status(status).Type(typ).Message(msg)
	return &o
}

// checkSigV4 checks a Bedrock request's authentication: an Authorization
// header of SigV4 shape whose credential scope names service bedrock and
// the server's region (the signature itself is not verified), or a Bedrock
// API key sent as a Bearer token.
func checkSigV4(h http.Header, region string) *Outcome {
	auth := strings.TrimSpace(h.Get("Authorization"))
	if auth == "" {
		return awsError(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	if scheme, tok, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
		if strings.TrimSpace(tok) == "" {
			return awsError(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
		}
		return nil
	}
	m := sigV4.FindStringSubmatch(auth)
	if m == nil {
		return awsError(403, "IncompleteSignatureException",
			"Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters of the form "+
				"AWS4-HMAC-SHA256 Credential=AKID/YYYYMMDD/region/bedrock/aws4_request, SignedHeaders=…, Signature=<64 hex digits>. Authorization="+
				strings.SplitN(auth, " ", 2)[0])
	}
	date, scopeRegion, service, signed := m[2], m[3], m[4], strings.Split(m[5], ";")
	if service != "bedrock" {
		return awsError(403, "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'. ")
	}
	if scopeRegion != region {
		return awsError(403, "InvalidSignatureException",
			"Credential should be scoped to a valid region. (The fake serves "+region+", not "+scopeRegion+".)")
	}
	if !slices.Contains(signed, "host") {
		return awsError(403, "InvalidSignatureException", "'Host' must be a 'SignedHeader' in the AWS Authorization.")
	}
	amzDate := h.Get("X-Amz-Date")
	if amzDate == "" {
		return awsError(403, "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if !strings.HasPrefix(amzDate, date) {
		return awsError(403, "InvalidSignatureException",
			"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '"+date+"' != '"+amzDate+"'")
	}
	return nil
}

// rejectBedrock checks an InvokeModel request: SigV4 (checkSigV4), then the
// body: an Anthropic Messages body without model and stream, with
// anthropic_version.
func rejectBedrock(h http.Header, r request, maxOut func(string) int, region string, c *carried) *Outcome {
	if o := checkSigV4(h, region); o != nil {
		return o
	}
	const malformed = "Malformed input request: "
	if r.err != nil {
		return awsError(400, "ValidationException", malformed+r.err.Error()+", please reformat your input and try again.")
	}
	for _, k := range []string{"model", "stream"} {
		if _, ok := r.fields[k]; ok {
			return awsError(400, "ValidationException", malformed+"#: extraneous key ["+k+"] is not permitted, please reformat your input and try again.")
		}
	}
	if o := anthropicVersionField(r, bedrockVersion); o != nil {
		o.errType = set("ValidationException")
		return o
	}
	return checkAnthropicBody(platformBody(r), maxOut, c)
}

// anthropicVersionField checks the body's anthropic_version on Bedrock and
// Vertex: required, and the platform's version or one of the API's
// (anthropic-sdk-go v2.15.0 forwards its anthropic-version header, 2026-10-21).
func anthropicVersionField(r request, platform string) *Outcome {
	raw, ok := r.fields["anthropic_version"]
	if !ok {
		return invalid(400, "Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again.")
	}
	var v string
	if json.Unmarshal(raw, &v) != nil || (v != platform && !slices.Contains(anthropicVersions, v)) {
		return invalid(400, "Invalid API version: anthropic_version must be "+platform+" (or an anthropic-version: "+
			strings.Join(anthropicVersions, ", ")+"), not "+string(raw))
	}
	return nil
}

// platformBody is a Bedrock or Vertex body as a Messages request: without
// anthropic_version and anthropic_beta, with the model of the path.
func platformBody(r request) request {
	fields := make(map[string]json.RawMessage, len(r.fields)+1)
	for k, v := range r.fields {
		if k != "anthropic_version" && k != "anthropic_beta" {
			fields[k] = v
		}
	}
	fields["model"] = marshal(r.model)
	r.fields = fields
	return r
}

// bedrockTypes are Bedrock's error types by status.
var bedrockTypes = map[int]string{
	400: "ValidationException",
	403: "AccessDeniedException",
	404: "ResourceNotFoundException",
	408: "ModelTimeoutException",
	424: "ModelErrorException",
	429: "ThrottlingException",
	500: "InternalServerException",
	503: "ServiceUnavailableException",
}

var bedrockMessages = map[int]string{
	400: "Malformed input request, please reformat your input and try again.",
	403: "You don't have access to the model with the specified model ID.",
	404: "The provided model identifier is invalid.",
	408: "Model has timed out in processing the request. Try your request again.",
	424: "Received error from the model.",
	429: "Too many requests, please wait before trying again.",
	500: "The system encountered an unexpected error during processing. Try your request again.",
	503: "Bedrock is unable to process your request.",
}

type bedrockErrorBody struct {
	Message string `json:"message"`
}

// bedrockError is a Bedrock error response: {"message":…} with the type in
// x-amzn-ErrorType.
func bedrockError(o Outcome, ex exchange) (int, []byte, []header) {
	status := errorStatus(o, Bedrock)
	typ := statusName(bedrockTypes, status, "ValidationException", "InternalServerException")
	msg := statusMessage(bedrockMessages, status)
	switch o.preset {
	case presetSpendCap:
		typ, msg = "ServiceQuotaExceededException", "Your request exceeds the service quota for your account. You can view your quotas at https://docs.aws.amazon.com/servicequotas/latest/userguide/gs-request-quota.html."
	case presetContextTooLong:
		msg = "Input is too long for requested model."
	}
	typ = o.errType.or(typ)
	return status, marshal(bedrockErrorBody{Message: o.message.or(msg)}), []header{{"X-Amzn-Errortype", typ}}
}

// bedrockStream is the Anthropic stream, with Bedrock's mid-stream error:
// an exception message.
type bedrockStream struct{ anthropicStream }

// exceptionPrefix marks an event that bedrockWriter sends as an exception
// message whose :exception-type follows the prefix.
const exceptionPrefix = "exception:"

func (s bedrockStream) fail(o Outcome) []event {
	typ := o.errType.or("internalServerException")
	msg := o.message.or(bedrockMessages[500])
	return []event{{name: exceptionPrefix + typ, data: marshal(bedrockErrorBody{Message: msg})}}
}

// bedrockWriter sends a stream's events as AWS event-stream messages: each
// Anthropic event as a chunk event whose payload's bytes field holds the
// event's JSON in base64, and an exception event as an exception message.
type bedrockWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

type bedrockChunk struct {
	Bytes string `json:"bytes"`
}

func (b *bedrockWriter) send(evs ...event) bool {
	var out []byte
	for _, e := range evs {
		if typ, ok := strings.CutPrefix(e.name, exceptionPrefix); ok {
			out = append(out, esMessage([]esHeader{
				{":exception-type", typ}, {":content-type", "application/json"}, {":message-type", "exception"},
			}, e.data)...)
			continue
		}
		payload := marshal(bedrockChunk{Bytes: base64.StdEncoding.EncodeToString(e.data)})
		out = append(out, esMessage([]esHeader{
			{":event-type", "chunk"}, {":content-type", "application/json"}, {":message-type", "event"},
		}, payload)...)
	}
	if len(out) > 0 {
		if _, err := b.w.Write(out); err != nil {
			return false
		}
	}
	_ = b.rc.Flush()
	return true
}
