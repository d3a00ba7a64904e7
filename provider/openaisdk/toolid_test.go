package openaisdk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// TestToolIDs drives both APIs through the shared cases of tool calls whose
// ids the conversation already holds (suite.ToolIDs): the caller is given
// distinct ids, whole and streamed, and the next turn answering them is
// accepted and sends distinct ids. Chat Completions (OpenAI and Azure) is
// served by provider/fake, the Responses API by responsesServer.
func TestToolIDs(t *testing.T) {
	s := suite.StartFake(t)
	const azureKey = "azure-key-0123456789abcdef"
	az, err := New(openai.NewClient(azure.WithEndpoint(s.URL(), "2024-10-21"), azure.WithAPIKey(azureKey),
		azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0), option.WithMaxRetryDelay(time.Millisecond)),
		Config{Platform: PlatformAzure, APIKey: azureKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("chat", func(t *testing.T) {
		suite.ToolIDs(t, suite.FakeTarget(s, "gpt-fake", newProvider(t, s.URL(), APIChat)))
	})
	t.Run("azure", func(t *testing.T) { suite.ToolIDs(t, suite.FakeTarget(s, "my-deployment", az)) })
	t.Run("responses", func(t *testing.T) {
		rs := &responsesServer{}
		rs.srv = suite.NewServer(t, rs.serve)
		suite.ToolIDs(t, suite.ToolIDTarget{Provider: newProvider(t, rs.srv.URL, APIResponses), Model: "gpt-4o",
			Serve: rs.next, Last: func() []byte { return rs.srv.Last().Body }})
	})
}

// responsesServer answers a Responses API request with function calls of
// the ids its ids says, whole or streamed as the request asks, then the
// next one with text. The function_call items without an id carry no
// call_id.
type responsesServer struct {
	srv      *suite.Server
	mu       sync.Mutex
	ids      func(body []byte) []string
	answered bool
}

func (rs *responsesServer) next(ids func(body []byte) []string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.ids, rs.answered = ids, false
}

func (rs *responsesServer) serve(w http.ResponseWriter, r *http.Request) {
	rs.mu.Lock()
	answered := rs.answered
	rs.answered = true
	rs.mu.Unlock()
	var body strings.Builder
	var req struct{ Stream bool }
	raw := rs.srv.Last().Body
	_ = json.Unmarshal(raw, &req)
	var items []string
	if answered {
		items = []string{`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Sunny in both.","annotations":[]}]}`}
	} else {
		for i, id := range rs.ids(raw) {
			callID := ""
			if id != "" {
				callID = `"call_id":` + mustJSON(id) + `,`
			}
			items = append(items, fmt.Sprintf(`{"type":"function_call","id":"fc_%d",%s"name":"get_weather","arguments":"{\"city\":\"Rome\"}","status":"completed"}`, i, callID))
		}
	}
	resp := func(status, output string) string {
		return `{"id":"resp_1","object":"response","status":"` + status + `","model":"gpt-4o","output":[` + output +
			`],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		body.WriteString(resp("completed", strings.Join(items, ",")))
		w.Write([]byte(body.String()))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	body.WriteString(responseEvent("response.created", `"response":`+resp("in_progress", "")))
	for i, item := range items {
		if strings.Contains(item, `"type":"message"`) {
			body.WriteString(responseEvent("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Sunny in both."`))
			continue
		}
		body.WriteString(responseEvent("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, i, item)))
		body.WriteString(responseEvent("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, i, item)))
	}
	body.WriteString(responseEvent("response.completed", `"response":`+resp("completed", strings.Join(items, ","))))
	w.Write([]byte(body.String()))
}
