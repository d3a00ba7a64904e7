package chain

// Answers that fail their schema: the error that says so without quoting
// the answer, and the conversation that re-asks the model.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// invalidOutput is the failure of an answer that did not pass its schema
// (verr, from validate). Its Message names only where and which keyword
// failed, since a violation's own message may quote the answer ("got
// \"Jane Doe\", want ..."); the whole description is its Detail, which the
// error's text leaves out.
func invalidOutput(provider string, status int, requestID string, verr error) *llm.Error {
	return &llm.Error{Provider: provider, Status: status, Kind: llm.KindInvalidOutput,
		Message: schemaSummary(verr), Detail: verr.Error(), RequestID: requestID, Err: verr}
}

// schemaSummary describes a schema failure without quoting the answer:
// "the answer does not match the schema: at /price (type); at (root)
// (required)", at most three places, then how many more.
func schemaSummary(verr error) string {
	switch {
	case errors.Is(verr, validate.ErrNoJSON):
		return "the answer holds no JSON"
	case errors.Is(verr, validate.ErrBadJSON):
		return "the answer's JSON is not valid"
	}
	paths, keywords := violations(verr)
	var b strings.Builder
	b.WriteString("the answer does not match the schema: ")
	for i := range paths {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(paths)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		p := paths[i]
		if p == "" {
			p = "(root)"
		}
		fmt.Fprintf(&b, "at %s (%s)", p, keywords[i])
	}
	return b.String()
}

// violations lists the paths and keywords of a schema failure, for
// telemetry: never the messages, which may quote the answer.
func violations(err error) (paths, keywords []string) {
	var verr *validate.ValidationError
	if !errors.As(err, &verr) {
		return []string{""}, []string{"no_json"}
	}
	for _, v := range verr.Violations {
		paths = append(paths, v.Path)
		keywords = append(keywords, v.Keyword)
	}
	return paths, keywords
}

// reask returns the conversation to re-ask a model whose answer failed the
// schema: msgs, the answer, and the problems (validate.Feedback). msgs is
// copied, never appended to in place.
func reask(msgs []llm.Message, answer string, err error) []llm.Message {
	out := make([]llm.Message, 0, len(msgs)+2)
	out = append(out, msgs...)
	return append(out,
		llm.Message{Role: llm.RoleAssistant, Content: answer},
		llm.Message{Role: llm.RoleUser, Content: validate.Feedback(err)})
}
