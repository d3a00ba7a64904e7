package sse_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/sse"
)

// A handler streaming a chain's answer: the stream is made with the
// request's context, so that a browser leaving cancels the call.
func ExampleChain() {
	api := fake.New() // stands in for the Anthropic API
	defer api.Close()
	api.Script("claude-sonnet-5-5", fake.Answer("Your order ships today."))
	claude, _ := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: api.URL(), HTTPClient: api.Client()})
	c, err := chain.New("answers").Primary(chain.Target{Name: "sonnet", Provider: claude, Model: "claude-sonnet-5-5"}).Build()
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: r.URL.Query().Get("q")}}}
		s := c.Stream(r.Context(), req)
		if err := sse.Write(w, r, sse.Chain(s)); err != nil {
			log.Printf("answer: %v", err) // the browser was told only a safe message
		}
	}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "?q=hi")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// event: text
	// data: {"text":"Your"}
	//
	// event: text
	// data: {"text":" order"}
	//
	// event: text
	// data: {"text":" ships"}
	//
	// event: text
	// data: {"text":" today."}
	//
	// event: done
	// data: {"target":"sonnet","provider":"anthropic","model":"claude-sonnet-5-5","cost":"$0.000114"}
}
