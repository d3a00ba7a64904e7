package fake

// Scripting knobs only the package's own tests turn; not part of the API.

func (o Outcome) ID(id string) Outcome                { return o.withID(id) }
func (s *Server) MaxOutputTokens(model string, n int) { s.setMaxOutputTokens(model, n) }

const InProcessURL = inProcessURL
