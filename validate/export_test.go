package validate

// Figures of the package that its external tests read; they are not part
// of the API.
const (
	MaxSchemaBytes = maxSchemaBytes
	MaxSchemaDepth = maxSchemaDepth
)
