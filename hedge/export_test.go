package hedge

// Figures of the package that its external tests read; they are not part
// of the API.
const (
	DefaultMinDelay = defaultMinDelay
	DefaultQuantile = defaultQuantile
)
