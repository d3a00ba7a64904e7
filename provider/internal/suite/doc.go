// Package suite holds the tests every HTTP adapter of this module must pass
// in the same way, written once and run against each of them: what an
// adapter sends where (never a redirect), what its errors and answers may
// quote, and how it classifies a transport that fails before any body. It
// has no code of its own outside its tests.
package suite
