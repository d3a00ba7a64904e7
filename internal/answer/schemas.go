package answer

import (
	"sync"

	"github.com/backstop-llm/backstop/validate"
)

// maxCached bounds the schemas a schemaCache keeps; past it they are all
// forgotten and compiled again as they are asked for.
const maxCached = 1024

// anyObject checks the arguments of a tool without an input schema.
var anyObject = func() *validate.Schema {
	s, err := validate.Compile([]byte(`{"type":"object"}`))
	if err != nil {
		panic(err) // a constant schema: a test fails first
	}
	return s
}()

// schemaCache checks tool-call arguments (arguments), compiling each
// distinct schema once and keeping it, by its bytes: the tool-call argument
// checks of a chain, whose requests carry the same tools call after call.
// The zero value is ready to use; it is safe for concurrent use.
type schemaCache struct {
	mu sync.RWMutex
	m  map[string]*validate.Schema
}

// get returns schema compiled, from the cache when it was compiled
// before. An empty schema means any JSON object.
func (c *schemaCache) get(schema []byte) (*validate.Schema, error) {
	if len(schema) == 0 {
		return anyObject, nil
	}
	c.mu.RLock()
	s := c.m[string(schema)] // no copy: the conversion is only looked up
	c.mu.RUnlock()
	if s != nil {
		return s, nil
	}
	s, err := validate.Compile(schema)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = make(map[string]*validate.Schema)
	}
	c.m[string(schema)] = s
	c.mu.Unlock()
	return s, nil
}

// arguments checks a tool call's arguments (a JSON object; empty means
// {}) against the tool's input schema (empty means any object), compiled
// once. It returns an error matching validate.ErrBadSchema when the schema
// does not compile, validate.ErrBadJSON when the arguments are not JSON,
// and a *validate.ValidationError (validate.ErrInvalid) when they fail the schema.
func (c *schemaCache) arguments(schema, args []byte) error {
	s, err := c.get(schema)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		args = []byte("{}")
	}
	return s.ValidateJSON(args)
}
