package fake

import (
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// azureVersion matches an Azure OpenAI data-plane api-version: a date,
// optionally -preview.
var azureVersion = regexp.MustCompile(`^20\d\d-\d\d-\d\d(-preview)?$`)

// azureOldest is the oldest api-version the fake accepts.
const azureOldest = "2022-12-01"

func azurePlatform(status int, code, msg string) *Outcome {
	o := Status(status).Code(code).Message(msg)
	o.platform = true
	return &o
}

// rejectAzure checks an Azure OpenAI request: the api-version (required on
// /openai/deployments, optional on /openai/v1, where it may be v1 or
// preview), the key (api-key, or Authorization: Bearer from Entra ID), then
// the Chat Completions body. On /openai/deployments the body's model is
// optional and the deployment in the path names the model.
func rejectAzure(ep endpoint, hr *http.Request, r request, c *carried) *Outcome {
	v := hr.URL.Query().Get("api-version")
	switch {
	case ep.azureV1:
		if v != "" && v != "v1" && v != "preview" && !azureVersion.MatchString(v) {
			return azurePlatform(400, "BadRequest", "API version not supported")
		}
	case v == "":
		return azurePlatform(404, "404", "Resource not found")
	case !azureVersion.MatchString(v) || v < azureOldest:
		return azurePlatform(400, "BadRequest", "API version not supported")
	}
	key := strings.TrimSpace(hr.Header.Get("Api-Key")) != ""
	if scheme, tok, ok := strings.Cut(strings.TrimSpace(hr.Header.Get("Authorization")), " "); ok &&
		strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != "" {
		key = true
	}
	if !key {
		return azurePlatform(401, "401", "Access denied due to invalid subscription key or wrong API endpoint. "+
			"Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
	}
	if r.err == nil {
		fields := make(map[string]json.RawMessage, len(r.fields)+1)
		for k, raw := range r.fields {
			if k != "data_sources" { // Azure On Your Data
				fields[k] = raw
			}
		}
		if ep.pathModel {
			fields["model"] = marshal(r.model)
		}
		r.fields = fields
	}
	return checkOpenAIBody(r, c)
}

type azureErrorBody struct {
	Error azureErrorDetail `json:"error"`
}

type azureErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// azureError is the error body Azure sends itself, {"error":{"code":…,
// "message":…}} with a string code: for authentication (401), a missing
// deployment (404 DeploymentNotFound), the rate limit (429) and the
// api-version checks. ok is false for the others, which Azure sends in
// OpenAI's error body.
func azureError(o Outcome, ex exchange) (status int, body []byte, ok bool) {
	status = errorStatus(o, Azure)
	code, msg := "", ""
	switch {
	case o.platform:
	case status == 401:
		code, msg = "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."
	case status == 404:
		code, msg = "DeploymentNotFound", "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."
	case status == 429 && o.preset != presetSpendCap:
		code = "429"
		msg = "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier."
		if d, ok := retryAfterSeconds(o); ok {
			msg += " Please retry after " + strconv.Itoa(int(math.Ceil(d.Seconds()))) + " seconds."
		}
		msg += " Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."
	default:
		return 0, nil, false
	}
	return status, marshal(azureErrorBody{Error: azureErrorDetail{Code: o.code.or(code), Message: o.message.or(msg)}}), true
}
