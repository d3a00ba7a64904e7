package anthropic

// What is specific to the Messages API's wire format: the answer's parsing,
// the error types and codes. What every adapter must do alike (the request's
// method, path, headers and body as its adapters-table entry describes
// them, statuses, headers on errors, unreadable bodies, redaction, one
// request per call, cancellation, configuration) is tested once for all in
// provider/internal/suite.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

const testKey = "sk-ant-api03-TESTKEY-0123456789abcdef"

func newProvider(t testing.TB, url string) *Provider {
	t.Helper()
	p, err := New(Config{APIKey: testKey, BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestValidate: Validate says what New would, so a configuration read from
// a file can be checked before any provider is built; the zero Config
// lacks only the key. (The suite's TestNew checks each field.)
func TestValidate(t *testing.T) {
	err := Config{}.Validate()
	if !errors.Is(err, problems.ErrInvalidConfig) || err.Error() != "anthropic: invalid configuration: Config.APIKey is empty; set it to the provider's API key" {
		t.Fatalf("Config{}.Validate() = %v", err)
	}
	if _, nerr := New(Config{}); nerr == nil || nerr.Error() != err.Error() {
		t.Fatalf("New(Config{}) = %v; want Validate's error", nerr)
	}
	if err := (Config{APIKey: "k"}).Validate(); err != nil {
		t.Fatalf("Config{APIKey: k}.Validate() = %v", err)
	}
}

var userReq = llm.Request{Model: "claude-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}

// completeErr runs one request that must fail and returns its *llm.Error.
func completeErr(t *testing.T, p *Provider, ctx context.Context) *llm.Error {
	t.Helper()
	return suite.CompleteErr(t, p, ctx, userReq, testKey)
}

const okBody = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test-20260101",
"content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Hello, "},{"type":"tool_use","id":"t","name":"x","input":{}},{"type":"text","text":"world"}],
"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":3,"cache_read_input_tokens":7}}`

func TestSuccess(t *testing.T) {
	reset := "2026-11-30T16:00:00Z"
	s := suite.NewServer(t, suite.Respond(200, okBody,
		"request-id", "req_abc",
		"anthropic-ratelimit-requests-limit", "50",
		"anthropic-ratelimit-requests-remaining", "49",
		"anthropic-ratelimit-requests-reset", reset,
		"anthropic-ratelimit-tokens-remaining", "garbage",
		"anthropic-ratelimit-input-tokens-limit", "40000",
		"anthropic-ratelimit-input-tokens-remaining", "39000",
		"anthropic-ratelimit-input-tokens-reset", "2026-11-30T16:00:00.5+01:00",
		"anthropic-ratelimit-output-tokens-limit", "8000",
	))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{
		Text: "Hello, world", Model: "claude-test-20260101", ID: "msg_01", RequestID: "req_abc",
		FinishReason: "end_turn", Usage: llm.Usage{InputTokens: 20, OutputTokens: 5, CacheReadTokens: 7, CacheWriteTokens: 3},
		ToolCalls: []llm.ToolCall{{ID: "t", Name: "x", Arguments: json.RawMessage(`{}`)}}, Finish: llm.FinishStop,
	}
	rl := res.RateLimit
	res.RateLimit = llm.RateLimit{}
	if !reflect.DeepEqual(*res, want) {
		t.Errorf("response\n got %+v\nwant %+v", *res, want)
	}
	r0, _ := time.Parse(time.RFC3339, reset)
	if a := rl.Requests; !a.Reported() || a.Limit != 50 || a.Remaining != 49 || !a.Reset.Equal(r0) {
		t.Errorf("Requests = %+v", a)
	}
	if rl.Tokens.Reported() {
		t.Errorf("Tokens reported from a garbled header: %+v", rl.Tokens)
	}
	r1 := time.Date(2026, 11, 30, 15, 0, 0, 5e8, time.UTC)
	if a := rl.InputTokens; !a.Reported() || a.Limit != 40000 || a.Remaining != 39000 || !a.Reset.Equal(r1) {
		t.Errorf("InputTokens = %+v", a)
	}
	if a := rl.OutputTokens; !a.Reported() || a.Limit != 8000 || a.Remaining != 0 || !a.Reset.IsZero() {
		t.Errorf("OutputTokens = %+v", a)
	}
}

func TestSuccessEmptyContent(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, `{"id":"m","type":"message","model":"m","content":[],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":0,"cache_read_input_tokens":null}}`))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "" || res.FinishReason != "max_tokens" || res.Usage.InputTokens != 1 || res.RateLimit != (llm.RateLimit{}) {
		t.Errorf("response %+v", res)
	}
}

func errBody(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_body"}`, typ, msg)
}

func TestErrorTypes(t *testing.T) {
	tests := []struct {
		status   int
		typ, msg string
		want     llm.Kind
	}{
		{400, "invalid_request_error", "messages: Field required", llm.KindBadRequest},
		{400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", llm.KindContextLength},
		{401, "authentication_error", "invalid x-api-key", llm.KindAuth},
		{402, "billing_error", "credit balance too low", llm.KindQuota},
		{403, "permission_error", "no access", llm.KindAuth},
		{404, "not_found_error", "model: claude-nope", llm.KindNotFound},
		{409, "conflict_error", "conflict", llm.KindConflict},
		{413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", llm.KindBadRequest},
		{429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", llm.KindRateLimited},
		{500, "api_error", "Internal server error", llm.KindServer},
		{504, "timeout_error", "Request timed out", llm.KindTimeout},
		{529, "overloaded_error", "Overloaded", llm.KindOverloaded},
		{409, "memory_path_conflict_error", "a memory exists at that path", llm.KindConflict},
		{412, "memory_precondition_failed_error", "the memory changed", llm.KindBadRequest},
		{200, "overloaded_error", "Overloaded", llm.KindOverloaded}, // an error sent with a 200
		// A type it does not know is classified by status: see the suite's
		// TestErrorClassifiedByStatus.
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.typ), func(t *testing.T) {
			s := suite.NewServer(t, suite.Respond(tt.status, errBody(tt.typ, tt.msg), "request-id", "req_hdr"))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			if e.Kind != tt.want || e.Status != tt.status || e.Type != tt.typ || e.Detail != tt.msg || e.RequestID != "req_hdr" {
				t.Errorf("got %+v; want Kind %v, Status %d, Type %s, Detail %q, RequestID req_hdr",
					e, tt.want, tt.status, tt.typ, tt.msg)
			}
			if llm.KindOf(e) != tt.want {
				t.Errorf("KindOf = %v; want %v", llm.KindOf(e), tt.want)
			}
		})
	}
}

func TestErrorDetailsAndRequestIDFallback(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(529, `{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CS"}`))
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if e.Kind != llm.KindOverloaded || e.RequestID != "req_011CS" {
		t.Errorf("got %+v; want overloaded with the body's request id", e)
	}
}

// TestSpendLimit: every spend cap the API documents is a quota (never
// retried, the breaker opens), recognised in error.details.error_code,
// anywhere in an error's message, or in a body that is not JSON at all,
// whatever the type and status say.
func TestSpendLimit(t *testing.T) {
	for _, code := range []string{"enforced_spend_limit_reached", "contract_spend_limit_reached", "linked_organization_spend_limit_reached"} {
		tests := map[string]struct {
			status int
			body   string
		}{
			"details": {429, `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified workspace API usage limits.","details":{"error_code":"` + code + `"}},"request_id":"req_1"}`},
			"message": {400, errBody("invalid_request_error", code+" for this org")},
			"html":    {429, `<html><body>` + code + `</body></html>`},
		}
		for name, tt := range tests {
			t.Run(code+"/"+name, func(t *testing.T) {
				s := suite.NewServer(t, suite.Respond(tt.status, tt.body, "retry-after", "30"))
				e := completeErr(t, newProvider(t, s.URL), context.Background())
				if e.Kind != llm.KindQuota || e.Code != code {
					t.Errorf("got %+v; want quota, code %s", e, code)
				}
			})
		}
	}
}

// TestErrorCodes classifies every error_code anthropic-sdk-go v2.15.0
// documents (its ErrorDetailsUnion), each sent with the status and type the
// SDK documents for it: a code that says more than its type (a spend cap,
// an acceleration limit, a target that is misconfigured rather than a
// request that is wrong) decides; any other is classified by its type. Most
// of the 400s, 403s and 409s belong to the Admin, Files and agent APIs and
// never come from /v1/messages; they are here so that none is missed.
func TestErrorCodes(t *testing.T) {
	typeOf := map[int]string{400: "invalid_request_error", 402: "billing_error", 403: "permission_error", 404: "not_found_error",
		409: "conflict_error", 412: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 503: "api_error", 529: "overloaded_error"}
	tests := []struct {
		status int
		want   llm.Kind
		codes  []string
	}{
		{429, llm.KindQuota, []string{"enforced_spend_limit_reached", "contract_spend_limit_reached"}},
		{429, llm.KindRateLimited, []string{"ramp_limit_exceeded"}},
		{402, llm.KindQuota, []string{"linked_organization_billing_unavailable", "linked_organization_spend_limit_reached"}},
		{400, llm.KindAuth, []string{"organization_on_hold", "organization_not_enrolled_in_beta", "organization_not_eligible",
			"claude_code_key_creator_not_member", "cmek_key_disabled", "cmek_key_network_blocked", "cmek_not_approved"}},
		{400, llm.KindNotFound, []string{"user_profile_not_found"}},
		{400, llm.KindTimeout, []string{"request_body_timeout", "external_key_validation_timed_out"}},
		{400, llm.KindBadRequest, []string{"already_member", "approval_required", "available_tools_limit_exceeded",
			"bundle_attachment_not_supported", "bundle_on_call", "cannot_invite_emails_with_unverified_domains",
			"cannot_remove_last_member", "cannot_sign_out_primary_owner", "cannot_sign_out_self", "claude_code_version_too_old",
			"cmek_feature_unsupported", "compaction_block_ambiguous", "compaction_block_misplaced", "compaction_content_mismatch",
			"compaction_incomplete_turn", "compaction_nothing_to_summarize", "compaction_signature_invalid",
			"compaction_too_many_tool_references", "compaction_tool_changes_mismatch", "email_domain_not_allowed",
			"environment_archived", "external_key_in_workspace_policy", "external_key_not_found", "external_key_provider_mismatch",
			"external_key_validation_failed", "external_storage_in_use", "external_storage_in_workspace_policy",
			"external_storage_not_available", "file_not_downloadable", "gcp_project_not_verified", "grant_required",
			"human_review_not_available", "human_review_on_with_external_storage", "image_dimensions_too_large",
			"invalid_config_type_change", "invalid_metadata", "invalid_storage_arn", "invite_already_exists", "key_profile_mismatch",
			"org_api_key_limit_exceeded", "org_member_limit_exceeded", "organization_type_not_supported",
			"parent_organization_required", "provider_not_allowed", "rbac_group_grants_owner_access",
			"rbac_group_order_limit_exceeded", "rbac_group_owner_access_unconfirmed", "region_not_supported",
			"request_body_encoding_invalid", "request_body_encoding_unsupported", "scan_failed", "settings_document_limit_exceeded",
			"settings_history_limit_exceeded", "slack_channel_set_up_settings_refused", "storage_attach_limit_reached",
			"storage_not_approved", "storage_not_attachable", "storage_profile_mismatch", "storage_profile_still_required",
			"storage_quota_exceeded", "storage_verification_failed", "thread_already_continued", "thread_continue_in_flight",
			"thread_fingerprint_mismatch", "thread_unsupported_request", "tool_name_conflict", "tool_reference_unresolved",
			"transcripts_storage_required", "unsupported_charset", "unsupported_region", "user_profile_required",
			"workspace_api_key_limit_exceeded", "workspace_human_review_disabled", "workspace_member_limit_exceeded",
			"workspace_policy_violation"}},
		{403, llm.KindAuth, []string{"api_key_scope_missing", "cannot_sign_out_managed_member", "cannot_sign_out_membership_admin",
			"cannot_sign_out_owner", "cannot_sign_out_privileged_member", "claude_tag_writes_not_enabled",
			"compliance_configuration_restricted", "environment_create_disabled", "environment_update_disabled",
			"organization_level_scoped_api_key_required", "sandbox_egress_restricted", "spend_limits_admin_api_writes_not_enabled",
			"user_profile_billing_not_authorized", "user_profile_not_billable"}},
		{404, llm.KindNotFound, []string{"environment_not_found", "file_expired", "rbac_group_managed_settings_not_found",
			"rbac_group_not_found", "rbac_role_not_found", "slack_channel_set_up_environment_not_found", "thread_not_found"}},
		{409, llm.KindConflict, []string{"concurrent_membership_change", "external_key_changed",
			"gcp_project_controlled_by_another_organization", "plugin_name_taken", "scan_pending", "skill_name_taken",
			"skill_read_blocked_undecryptable", "slack_channel_set_up_settings_conflict", "storage_already_registered",
			"storage_attached_during_archive", "storage_changed_concurrently", "storage_in_use", "workspace_changed_concurrently"}},
		{412, llm.KindBadRequest, []string{"heartbeat_precondition_failed"}},
		{413, llm.KindBadRequest, []string{"request_body_too_large_after_decoding"}},
		{503, llm.KindServer, []string{"authorization_check_unavailable", "change_outcome_unknown", "cmek_context_unavailable",
			"cmek_key_unreachable", "registration_pending", "workspace_created_incomplete"}},
		{529, llm.KindOverloaded, []string{"compaction_unavailable"}},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		for _, code := range tt.codes {
			if seen[code] {
				t.Errorf("%s listed twice", code)
			}
			seen[code] = true
			body := `{"type":"error","error":{"type":"` + typeOf[tt.status] + `","message":"m","details":{"error_code":"` + code + `"}},"request_id":"req_1"}`
			p := newProvider(t, "http://127.0.0.1")
			e := p.parseError(fuzzReply(tt.status, []byte(body)))
			if e.Kind != tt.want || e.Code != code || e.Type != typeOf[tt.status] || e.Status != tt.status {
				t.Errorf("%d %s: got Kind %v, Code %q, Type %q; want %v", tt.status, code, e.Kind, e.Code, e.Type, tt.want)
			}
			// An error event in a stream, after the 200, is classified alike.
			if k := p.parseError(fuzzReply(200, []byte(body))).Kind; k != tt.want {
				t.Errorf("%s in a stream: Kind %v; want %v", code, k, tt.want)
			}
		}
	}
	if len(seen) != 133 {
		t.Errorf("%d codes; anthropic-sdk-go v2.15.0 documents 133", len(seen))
	}
}

func TestRefusal(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, `{"id":"m","type":"message","model":"m","content":[{"type":"text","text":"I can't"}],"stop_reason":"refusal","usage":{}}`, "request-id", "req_r"))
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || e.RequestID != "req_r" || e.Status != 200 {
		t.Errorf("got %+v; want content filter", e)
	}
}
