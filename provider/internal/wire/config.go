package wire

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// URL joins base (a Config.BaseURL, def when empty) and path into the
// endpoint URL, checking base so that a mistake fails at construction with
// a message saying what to change. path starts with "/" and may carry a
// query.
func URL(base, def, path string) (string, error) {
	if base == "" {
		base = def
	}
	if strings.TrimSpace(base) != base {
		// A trailing space after a path prefix would parse, and be sent
		// as %20.
		return "", fmt.Errorf("Config.BaseURL %q has leading or trailing spaces; trim them", base)
	}
	u, err := url.Parse(base)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error would quote the whole URL
		}
		return "", fmt.Errorf("Config.BaseURL is not a valid URL (%v); write it as https://host[:port][/prefix]", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("Config.BaseURL must start with https:// (or http:// for a local server), got scheme %q", u.Scheme)
	case u.Host == "":
		return "", errors.New("Config.BaseURL has no host; write it as https://host[:port][/prefix]")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(base, "?"):
		return "", errors.New("Config.BaseURL must not carry a query or fragment; it is only the scheme, host and an optional path prefix")
	case !strings.HasPrefix(path, "/"):
		return "", fmt.Errorf("the endpoint path %q must start with /", path)
	}
	full := strings.TrimRight(base, "/") + path
	if _, err := url.Parse(full); err != nil {
		return "", fmt.Errorf("the endpoint path %q does not make a valid URL with Config.BaseURL", path)
	}
	return full, nil
}

// MaxBytes checks a Config.MaxResponseBytes: 0 means DefaultMaxBytes.
func MaxBytes(n int64) (int64, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("Config.MaxResponseBytes is %d; use a positive byte count, or 0 for the default (%d, 8 MiB)", n, DefaultMaxBytes)
	case n == 0:
		return DefaultMaxBytes, nil
	}
	return n, nil
}

// Key checks a Config.APIKey: it must be present and fit in a header.
func Key(key string) error {
	if key == "" {
		return errors.New("Config.APIKey is empty; set it to the provider's API key")
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f {
			return errors.New("Config.APIKey contains a control character (a trailing newline from a file or environment variable?); trim it")
		}
	}
	if strings.TrimSpace(key) != key {
		return errors.New("Config.APIKey has leading or trailing spaces; trim them")
	}
	return nil
}

// HeaderName reports whether name is a header name net/http sends: a
// token of RFC 9110 (letters, digits and !#$%&'*+-.^_`|~), not empty.
func HeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Header checks a Config.Header: every name a header name, every value
// free of control characters but tab (net/http would refuse either on
// every request, failing each attempt instead of the construction), and
// no two names that are one header once canonical (which of them is sent
// would depend on the map's order). It returns one problem per mistake, in
// the order of the names.
func Header(h http.Header) []error {
	var errs []error
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	first := make(map[string]string, len(h))
	for _, k := range names {
		if !HeaderName(k) {
			errs = append(errs, fmt.Errorf("Config.Header name %q is not a header name; use letters, digits and -", k))
			continue
		}
		ck := http.CanonicalHeaderKey(k)
		if prev, ok := first[ck]; ok {
			errs = append(errs, fmt.Errorf("Config.Header names %q and %q, which are one header; put the values under one of them", prev, k))
			continue
		}
		first[ck] = k
		for _, v := range h[k] {
			if strings.IndexFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) >= 0 {
				errs = append(errs, fmt.Errorf("Config.Header[%q] has a value with a control character (a trailing newline from a file?); remove it", k))
				break
			}
		}
	}
	return errs
}

// SDKConfig checks what every SDK adapter's Config holds alike: its
// optional APIKey (redacted wherever it appears, so it must be written as
// it is sent) and its MaxResponseBytes. It returns each problem, in the
// words the adapters' Validate reports.
func SDKConfig(apiKey string, maxBytes int64) []error {
	var errs []error
	if apiKey != "" {
		if err := Key(apiKey); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := MaxBytes(maxBytes); err != nil {
		errs = append(errs, err)
	}
	return errs
}
