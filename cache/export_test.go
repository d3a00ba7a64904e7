package cache

// Len is size, for the external tests; not part of the API.
func (m *Memory) Len() int { return m.size() }
