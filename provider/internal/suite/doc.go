// Package suite holds the tests every HTTP adapter of this module must pass
// in the same way, written once and run against each of them (its _test
// files, driven by the adapters table): what an adapter sends where (never
// a redirect), how it classifies statuses, transport failures and bodies it
// cannot read, what its errors and answers may quote (never the key), the
// headers it reads on every error, and how its streams end, fail and stop.
// What is specific to one wire format (the request shape, the provider's
// own error types and codes, its stream events) is tested in the adapter's
// own package.
//
// Its only code outside tests is the handful of helpers those adapter
// tests share with it: a recording loopback server, canned replies and
// event streams, and readers asserting how a call or a stream fails.
package suite
