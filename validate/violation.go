package validate

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// english prints the library's messages as its own Error does. A Printer is
// read-only once made, so sharing it is safe.
var english = message.NewPrinter(language.English)

// Violation is one way an answer breaks the schema: a leaf of the
// jsonschema library's error tree.
type Violation struct {
	// Path is the JSON Pointer (RFC 6901) of the offending value in the
	// answer, such as "/items/0/price"; "" is the whole answer.
	Path string
	// Keyword is the schema keyword that failed: "required", "type",
	// "enum", "maxLength", "additionalProperties", "format", ... A value
	// forbidden by a false schema gets the keyword that holds it
	// ("unevaluatedProperties", "properties", "items"), or "false".
	Keyword string
	// Message is the library's description, such as "got string, want
	// number" or "missing property 'total'" ("value not allowed here (false
	// schema)" for a false schema). It may quote the answer (a
	// string that fails a pattern or a format, a property name): keep it
	// out of telemetry unless content is opted in; Path and Keyword are
	// what the chain records.
	Message string
	// SchemaPath is the JSON Pointer of the failing keyword in the schema
	// document, such as "/properties/price/type"; a full URL when the
	// keyword lives in a resource with its own $id.
	SchemaPath string
}

// String formats v as "at /items/0/price: type: got string, want number";
// the root is "(root)", and the keyword is not repeated when the message
// starts with it ("at /name: maxLength: got 90, want 80").
func (v Violation) String() string {
	var b strings.Builder
	v.write(&b, len(v.Message))
	return b.String()
}

// write appends v to b, cutting the message to at most max bytes.
func (v Violation) write(b *strings.Builder, max int) {
	b.WriteString("at ")
	if v.Path == "" {
		b.WriteString("(root)")
	} else {
		b.WriteString(v.Path)
	}
	b.WriteString(": ")
	msg := v.Message
	if v.Keyword != "" && !strings.HasPrefix(msg, v.Keyword+":") {
		b.WriteString(v.Keyword)
		b.WriteString(": ")
	}
	if len(msg) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		b.WriteString(msg[:cut])
		b.WriteString("...")
		return
	}
	b.WriteString(msg)
}

// ValidationError is an answer that parsed as JSON but broke the schema. It
// matches ErrInvalid.
type ValidationError struct {
	// Violations lists every leaf violation once, sorted by Path (array
	// indices in numeric order), then Keyword, then Message, so the order
	// does not depend on map iteration in the validator. Under anyOf and
	// oneOf every alternative's violations are listed. Never empty.
	Violations []Violation
}

// errorShown is how many violations Error spells out.
const errorShown = 3

// Error lists the first few violations and counts the rest:
// "validate: invalid answer: 4 schema violations: at /items/0/price: type:
// got string, want number; at (root): required: missing property 'total';
// ...; and 1 more".
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	b.WriteString(": ")
	if n := len(e.Violations); n == 1 {
		b.WriteString("1 schema violation: ")
	} else {
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" schema violations: ")
	}
	for i, v := range e.Violations {
		if i == errorShown {
			b.WriteString("; and ")
			b.WriteString(strconv.Itoa(len(e.Violations) - errorShown))
			b.WriteString(" more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		v.write(&b, len(v.Message))
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Limits of feedback.
const (
	feedbackMax     = 1024 // bytes in all
	feedbackLineMax = 200  // bytes of one message
)

const (
	feedbackHead = "Your previous answer did not match the required JSON schema. Problems " +
		"(each at a JSON Pointer into your answer; (root) is the whole answer):\n"
	feedbackTail = "Reply with the corrected JSON only, no other text."
)

// feedback is Feedback of e: its violations.
func (e *ValidationError) feedback() string {
	var b strings.Builder
	b.Grow(feedbackMax)
	b.WriteString(feedbackHead)
	const more = "- and 18446744073709551615 more\n" // room kept for the count
	room := feedbackMax - len(feedbackHead) - len(feedbackTail) - len(more)
	var line strings.Builder
	for i, v := range e.Violations {
		line.Reset()
		line.WriteString("- ")
		v.write(&line, feedbackLineMax)
		line.WriteByte('\n')
		if line.Len() > room {
			b.WriteString("- and ")
			b.WriteString(strconv.Itoa(len(e.Violations) - i))
			b.WriteString(" more\n")
			break
		}
		room -= line.Len()
		b.WriteString(line.String())
	}
	b.WriteString(feedbackTail)
	return b.String()
}

// Feedback returns what to tell the model about an invalid answer, for any
// error Extract, Validate, ValidateJSON or Decode returned. For a
// ValidationError it describes the violations, for a follow-up turn that
// asks the model to fix its answer: a sentence, one line per violation
// (path, keyword, message; a long message cut at 200 bytes), a count of the
// lines left out, and a request for the corrected JSON alone. It never
// exceeds 1 KiB and never quotes the schema beyond what the messages name
// (a missing property, the allowed values of an enum). It returns a
// request for JSON alone when the answer held none (ErrNoJSON) or it did
// not parse (ErrBadJSON). It returns "" for nil and for errors that are not about the answer (ErrBadSchema,
// ErrTypeMismatch, anything else).
func Feedback(err error) string {
	var verr *ValidationError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &verr):
		return verr.feedback()
	case errors.Is(err, ErrNoJSON):
		return "Your previous answer contained no JSON. Reply with only a JSON value that matches the " +
			"required schema, with no text before or after it."
	case errors.Is(err, ErrBadJSON):
		return "Your previous answer was not valid JSON. Reply with only a JSON value that matches the " +
			"required schema, with no text before or after it."
	}
	return ""
}

// leaf is a violation with its location kept as tokens, for sorting.
type leaf struct {
	loc []string
	v   Violation
}

// newValidationError flattens the library's error tree into its leaves.
func newValidationError(root *jsonschema.ValidationError) *ValidationError {
	var leaves []leaf
	collect(root, &leaves)
	slices.SortFunc(leaves, func(a, b leaf) int {
		if c := compareLocations(a.loc, b.loc); c != 0 {
			return c
		}
		return cmp.Or(
			strings.Compare(a.v.Keyword, b.v.Keyword),
			strings.Compare(a.v.Message, b.v.Message),
			strings.Compare(a.v.SchemaPath, b.v.SchemaPath))
	})
	vs := make([]Violation, 0, len(leaves))
	for i, l := range leaves {
		if i > 0 && l.v == leaves[i-1].v {
			continue
		}
		vs = append(vs, l.v)
	}
	if len(vs) == 0 { // not expected: the library reports a leaf for every failure
		vs = append(vs, Violation{Message: root.Error()})
	}
	return &ValidationError{Violations: vs}
}

// collect appends the leaves under e. Contains and minContains are leaves
// although the library attaches every item's failure to them: those items
// are not wrong, the array is.
func collect(e *jsonschema.ValidationError, out *[]leaf) {
	switch e.ErrorKind.(type) {
	case *kind.Contains, *kind.MinContains:
	default:
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				collect(c, out)
			}
			return
		}
	}
	if e.ErrorKind == nil {
		return
	}
	if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
		slices.Sort(k.Properties) // the validator lists them in map order
	}
	kw := e.ErrorKind.KeywordPath()
	v := Violation{
		Path:       pointer(e.InstanceLocation),
		Keyword:    keyword(e, kw),
		Message:    e.ErrorKind.LocalizedString(english),
		SchemaPath: strings.TrimPrefix(e.SchemaURL, schemaURL+"#") + pointer(kw),
	}
	if _, ok := e.ErrorKind.(*kind.FalseSchema); ok {
		v.Message = "value not allowed here (" + v.Message + ")"
	}
	*out = append(*out, leaf{loc: e.InstanceLocation, v: v})
}

// keyword names the failing keyword of a leaf.
func keyword(e *jsonschema.ValidationError, kw []string) string {
	if len(kw) > 0 {
		return kw[0]
	}
	switch e.ErrorKind.(type) {
	case *kind.Not:
		return "not"
	case *kind.RefCycle:
		return "$ref"
	case *kind.FalseSchema:
		// The keyword holding the false schema: ".../unevaluatedProperties",
		// ".../properties/name", ".../prefixItems/2".
		_, frag, _ := strings.Cut(e.SchemaURL, "#")
		toks := strings.Split(frag, "/")
		n := len(toks)
		if n >= 2 && isParentKeyword(toks[n-2]) {
			return toks[n-2]
		}
		if n >= 1 && isSchemaKeyword(toks[n-1]) {
			return toks[n-1]
		}
		return "false"
	}
	return ""
}

// isSchemaKeyword reports whether keyword k holds one subschema.
func isSchemaKeyword(k string) bool {
	switch k {
	case "additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems",
		"items", "contains", "propertyNames", "not", "if", "then", "else":
		return true
	}
	return false
}

// isParentKeyword reports whether keyword k holds a map or an array of
// subschemas.
func isParentKeyword(k string) bool {
	switch k {
	case "properties", "patternProperties", "dependentSchemas", "dependencies",
		"prefixItems", "items", "allOf", "anyOf", "oneOf":
		return true
	}
	return false
}

// pointer joins tokens into a JSON Pointer.
func pointer(toks []string) string {
	if len(toks) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
		}
		b.WriteString(t)
	}
	return b.String()
}

// compareLocations orders instance locations token by token, array indices
// (all-digit tokens) numerically, a parent before its children.
func compareLocations(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if c := compareTokens(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func compareTokens(a, b string) int {
	if isIndex(a) && isIndex(b) {
		if c := cmp.Compare(len(a), len(b)); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func isIndex(t string) bool {
	if t == "" || len(t) > 1 && t[0] == '0' {
		return false
	}
	for i := range len(t) {
		if t[i] < '0' || t[i] > '9' {
			return false
		}
	}
	return true
}
