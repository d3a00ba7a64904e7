// Package validate will own JSON extraction from answers and JSON-schema
// validation (on github.com/santhosh-tekuri/jsonschema/v6), with typed
// decoding. It is being built.
package validate
