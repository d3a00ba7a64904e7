// Package tracing will own backstop's OpenTelemetry spans, events and
// metrics, and is the only package that names telemetry attributes. It is
// being built.
package tracing
