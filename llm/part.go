package llm

import (
	"encoding/json"
	"strings"
)

// Part is one piece of a message. Exactly one field is set:
//
//   - Text: text, in any message;
//   - Media: an image or a document (PDF, plain text), in a user message;
//   - ToolCall: a call the model made, in an assistant message;
//   - ToolResult: what the caller's tool returned for an earlier ToolCall,
//     in a user message (as Anthropic and Gemini carry them; the OpenAI
//     adapter turns each into its own "tool" message).
//
// The constructors (TextPart, ImagePart, DocumentPart, ToolCallPart,
// ToolResultPart, …) build each kind.
type Part struct {
	Text       string
	Media      *Media
	ToolCall   *ToolCall
	ToolResult *ToolResult
}

// Media is an image or a document, sent inline (Data, with its MediaType)
// or by reference (URL). Exactly one of Data and URL is set.
type Media struct {
	// MediaType is the IANA media type: image/png, image/jpeg, image/gif,
	// image/webp, application/pdf, text/plain. Required with Data; with a
	// URL it says whether the URL is an image or a document (empty means
	// an image).
	MediaType string
	// Data is the file's bytes; adapters encode them (base64) as their
	// wire format wants.
	Data []byte
	// URL is where the provider fetches the file from (https).
	URL string
}

// IsDocument reports whether m is a document (PDF, plain text) rather than
// an image.
func (m *Media) IsDocument() bool {
	return m.MediaType != "" && !strings.HasPrefix(m.MediaType, "image/")
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Text: text} }

// ImagePart returns an inline image of mediaType (image/png, image/jpeg,
// image/gif, image/webp).
func ImagePart(mediaType string, data []byte) Part {
	return Part{Media: &Media{MediaType: mediaType, Data: data}}
}

// ImageURLPart returns an image the provider fetches from url.
func ImageURLPart(url string) Part { return Part{Media: &Media{URL: url}} }

// DocumentPart returns an inline document of mediaType (application/pdf,
// text/plain).
func DocumentPart(mediaType string, data []byte) Part {
	return Part{Media: &Media{MediaType: mediaType, Data: data}}
}

// DocumentURLPart returns a PDF the provider fetches from url.
func DocumentURLPart(url string) Part {
	return Part{Media: &Media{MediaType: "application/pdf", URL: url}}
}

// ToolCallPart returns a call of tool name with arguments (a JSON object),
// identified by id: the part an assistant message carries to replay a call
// the model made.
func ToolCallPart(id, name string, arguments json.RawMessage) Part {
	return Part{ToolCall: &ToolCall{ID: id, Name: name, Arguments: arguments}}
}

// ToolResultPart returns the result of the tool call callID: content, the
// tool's output as text (JSON is text too), and isError when the tool
// failed.
func ToolResultPart(callID, content string, isError bool) Part {
	return Part{ToolResult: &ToolResult{CallID: callID, Content: content, IsError: isError}}
}

// set counts the fields of p that are set.
func (p *Part) set() int {
	n := 0
	if p.Text != "" {
		n++
	}
	if p.Media != nil {
		n++
	}
	if p.ToolCall != nil {
		n++
	}
	if p.ToolResult != nil {
		n++
	}
	return n
}

// Text returns the text of m: Content, then each text part, concatenated.
func (m *Message) Text() string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for _, p := range m.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
