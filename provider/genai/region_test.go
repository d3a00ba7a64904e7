package genai

import (
	"context"
	"strings"
	"testing"

	gg "google.golang.org/genai"
)

// TestRegionAgainstLocation: on Vertex AI the client's Location says where
// requests are processed; an Config.Region that contradicts it is an
// error naming both. Where the client does not say (the Gemini API, a
// Vertex AI client behind a BaseURL without project and location), Region
// is the caller's word.
func TestRegionAgainstLocation(t *testing.T) {
	vertexAt := func(loc string) *gg.Client {
		c, err := gg.NewClient(context.Background(), &gg.ClientConfig{
			Backend: gg.BackendVertexAI, Project: "p", Location: loc, HTTPClient: oauthClient(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := New(vertexAt("us-central1"), Config{Region: "europe-west4"}); err == nil ||
		!strings.Contains(err.Error(), "europe-west4") || !strings.Contains(err.Error(), "us-central1") {
		t.Errorf("a Region contradicting the Location: %v; want an error naming both", err)
	}
	for _, region := range []string{"", "us-central1"} {
		p, err := New(vertexAt("us-central1"), Config{Region: region})
		if err != nil || p.Deployment().Region != "us-central1" {
			t.Errorf("Region %q: %v, %+v", region, err, p)
		}
	}
	// Express mode on the default endpoint: the global endpoint.
	express, err := gg.NewClient(context.Background(), &gg.ClientConfig{Backend: gg.BackendVertexAI, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if p := newProvider(t, express, Config{}); p.Deployment().Region != "global" {
		t.Errorf("express mode: region %q; want global", p.Deployment().Region)
	}
	if _, err := New(express, Config{Region: "europe-west4"}); err == nil || !strings.Contains(err.Error(), "global") {
		t.Errorf("express mode with Region europe-west4: %v; want an error", err)
	}
	// Where the client does not say, Region is the caller's word.
	g := newProvider(t, geminiClient(t, "http://127.0.0.1:1", nil), Config{Region: "europe-west4"})
	if g.Deployment().Region != "europe-west4" {
		t.Errorf("Gemini API: %+v", g.Deployment())
	}
	proxy, err := gg.NewClient(context.Background(), &gg.ClientConfig{Backend: gg.BackendVertexAI, HTTPClient: oauthClient(),
		HTTPOptions: gg.HTTPOptions{BaseURL: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := newProvider(t, proxy, Config{Region: "eu"}); p.Deployment().Region != "eu" {
		t.Errorf("Vertex AI behind a proxy: %+v", p.Deployment())
	}
}
