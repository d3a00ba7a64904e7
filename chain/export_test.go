package chain

// OnPrefixHash sets what is called each time a call hashes its
// conversation's prefix (nil: nothing), for the external tests; not part
// of the API.
func OnPrefixHash(f func()) { prefixHashed = f }
