// Package suite holds the tests every HTTP adapter of this module must pass
// in the same way, written once and run against each of them (its _test
// files, driven by the adapters table): what an adapter sends where (never
// a redirect), how it classifies statuses, transport failures and bodies it
// cannot read, what its errors and answers may quote (never the key), the
// headers it reads on every error, what it sends as its wire format
// documents it (the adapters table holds each one's bodies and events), and
// how its streams end, fail and stop. What only one adapter does (the
// provider's own error types and codes, its answers' and events' parsing,
// its own Config fields) is tested in the adapter's own package.
//
// Its only code outside tests is the handful of helpers those adapter
// tests share with it: a recording loopback server, canned replies and
// event streams, a replaying transport, readers asserting how a call or a
// stream fails, and the bodies of the fuzz targets every adapter runs with
// its own seeds (FuzzParseError, FuzzParseResponse, FuzzStream).
package suite
