package chain

// Figures of the package that its external tests read; they are not part
// of the API.
const (
	DefaultDegradeTimeout = defaultDegradeTimeout
	DefaultTimeout        = defaultTimeout
	DefaultIdleTimeout    = defaultIdleTimeout
)
