// Package sdktest drives backstop's fake provider (provider/fake) with the
// official SDKs, anthropic-sdk-go/v2 (with its bedrock and vertex
// packages), openai-go/v3 (with azure) and google.golang.org/genai (Gemini
// API and Vertex AI), so that the fake's wire shapes cannot drift from what
// the SDKs expect: every field an SDK marks required must be present in the
// fake's answers, and its requests must be accepted. The Bedrock tests also
// decode the fake's AWS event stream with aws-sdk-go-v2's decoder. It is a separate module so that backstop itself does
// not depend on the SDKs; it has no non-test code.
package sdktest
