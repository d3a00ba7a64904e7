package validate_test

import (
	"errors"
	"fmt"

	"github.com/backstop-llm/backstop/validate"
)

const answerSchema = `{
	"type": "object",
	"required": ["answer", "confidence"],
	"additionalProperties": false,
	"properties": {
		"answer": {"type": "string", "minLength": 1},
		"confidence": {"type": "number", "minimum": 0, "maximum": 1},
		"sources": {"type": "array", "items": {"type": "string", "format": "uri"}}
	}
}`

// Compile the schema once; validate every answer, whatever produced it.
func ExampleSchema_Validate() {
	schema, err := validate.Compile([]byte(answerSchema))
	if err != nil {
		panic(err) // a bad schema: chain.Build reports it
	}

	good := "Here is my answer:\n```json\n{\"answer\": \"Restart the router.\", \"confidence\": 0.9}\n```"
	raw, err := schema.Validate(good)
	fmt.Println(string(raw), err)

	bad := `Sure! {"answer": "", "confidence": 1.2, "sources": ["not a uri"], "mood": "happy"}`
	_, err = schema.Validate(bad)
	fmt.Println(errors.Is(err, validate.ErrInvalid))
	var verr *validate.ValidationError
	if errors.As(err, &verr) {
		for _, v := range verr.Violations {
			fmt.Printf("%s | %s | %s\n", v.Path, v.Keyword, v.Message)
		}
	}
	// Output:
	// {"answer": "Restart the router.", "confidence": 0.9} <nil>
	// true
	//  | additionalProperties | additional properties 'mood' not allowed
	// /answer | minLength | minLength: got 0, want 1
	// /confidence | maximum | maximum: got 1.2, want 1
	// /sources/0 | format | 'not a uri' is not valid uri: relative url
}

// Feedback is what the chain appends to the conversation when it re-asks
// the model to fix an invalid answer.
func ExampleFeedback() {
	schema, err := validate.Compile([]byte(answerSchema))
	if err != nil {
		panic(err)
	}
	_, err = schema.Validate(`{"answer": "Restart the router.", "confidence": "high"}`)
	fmt.Println(validate.Feedback(err))
	// Output:
	// Your previous answer did not match the required JSON schema. Problems (each at a JSON Pointer into your answer; (root) is the whole answer):
	// - at /confidence: type: got string, want number
	// Reply with the corrected JSON only, no other text.
}

type Answer struct {
	Answer     string   `json:"answer"`
	Confidence float64  `json:"confidence"`
	Sources    []string `json:"sources"`
}

// Decode validates, then unmarshals into a Go type.
func ExampleDecode() {
	schema, err := validate.Compile([]byte(answerSchema))
	if err != nil {
		panic(err)
	}
	ans, raw, err := validate.Decode[Answer](schema,
		`{"answer": "Restart the router.", "confidence": 0.9, "sources": ["https://example.com/kb/42"]}`)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q %v %v\n", ans.Answer, ans.Confidence, ans.Sources)
	fmt.Println(len(raw) > 0)

	// The schema allows an integer of any size; int8 cannot hold 1000.
	type Small struct {
		N int8 `json:"n"`
	}
	loose, err := validate.Compile([]byte(`{"properties": {"n": {"type": "integer"}}}`))
	if err != nil {
		panic(err)
	}
	_, _, err = validate.Decode[Small](loose, `{"n": 1000}`)
	fmt.Println(errors.Is(err, validate.ErrTypeMismatch), errors.Is(err, validate.ErrInvalid))
	// Output:
	// "Restart the router." 0.9 [https://example.com/kb/42]
	// true
	// true false
}

// Extract finds the JSON in a model's answer without validating it.
func ExampleExtract() {
	for _, text := range []string{
		`{"a": 1}`,
		"Sure:\n```json\n{\"a\": 2}\n```\nAnything else?",
		`The result is {"a": 3}, as requested.`,
		`I could not find it.`,
	} {
		j, err := validate.Extract(text)
		fmt.Printf("%s %v\n", j, errors.Is(err, validate.ErrNoJSON))
	}
	// Output:
	// {"a": 1} false
	// {"a": 2} false
	// {"a": 3} false
	//  true
}
