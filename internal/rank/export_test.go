package rank

// DefaultDecay is defaultDecay, for the external tests; not part of the API.
const DefaultDecay = defaultDecay
