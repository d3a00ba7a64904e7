package genai

import (
	"fmt"
	"net/url"
	"strings"

	gg "google.golang.org/genai"
)

// clientRegion returns where the client sends requests, known false when
// it does not say: on Vertex AI, the location in the request path
// (projects/P/locations/L, sent whenever the client has a project and a
// location); in express mode without one, the global endpoint, unless a
// BaseURL points elsewhere. The Gemini API does not say where it
// processes requests.
func clientRegion(cc gg.ClientConfig, vertex bool) (string, bool) {
	switch {
	case !vertex:
		return "", false
	case cc.Project != "" && cc.Location != "":
		return cc.Location, true
	case cc.APIKey != "" && globalEndpoint(cc.HTTPOptions.BaseURL):
		return "global", true
	}
	return "", false
}

// globalEndpoint reports whether base is Vertex AI's global endpoint,
// which the SDK uses in express mode.
func globalEndpoint(base string) bool {
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "aiplatform.googleapis.com")
}

// deployedRegion returns Deployment().Region: the client's, when it says
// (a contradicting declaration is an error naming both), else declared,
// the caller's word.
func deployedRegion(cc gg.ClientConfig, vertex bool, declared string) (string, error) {
	where, known := clientRegion(cc, vertex)
	if !known {
		return declared, nil
	}
	if declared != "" && !strings.EqualFold(strings.TrimSpace(declared), where) {
		return "", fmt.Errorf("%w: Config.Region %q contradicts the client, which sends requests to Vertex AI location %q (its ClientConfig.Location, or the global endpoint of express mode): the client decides where data goes; leave Region empty, or build the client for %q",
			errHead, declared, where, declared)
	}
	return where, nil
}
