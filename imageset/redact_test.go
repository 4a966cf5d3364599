package imageset

import (
	"strings"
	"testing"
)

// TestRedacted: stored copies of a configuration never hold a helm
// repository password, and redacting leaves the caller's config alone.
func TestRedacted(t *testing.T) {
	cfg := &ImageSetConfiguration{Kind: imageSetConfigurationKind, APIVersion: APIVersion}
	cfg.Mirror.Helm.Repositories = []HelmRepository{
		{Name: "private", URL: "https://robot:s3cret-pw@charts.example.com/stable"},
		{Name: "user-only", URL: "https://robot@charts.example.com/other"},
		{Name: "public", URL: "https://charts.example.com/public"},
	}
	out, err := MarshalYAML(Redacted(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret-pw") {
		t.Errorf("redacted configuration holds the password:\n%s", out)
	}
	for _, want := range []string{"https://robot:REDACTED@charts.example.com/stable", "https://robot@charts.example.com/other", "https://charts.example.com/public"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("redacted configuration lacks %s:\n%s", want, out)
		}
	}
	if cfg.Mirror.Helm.Repositories[0].URL != "https://robot:s3cret-pw@charts.example.com/stable" {
		t.Errorf("Redacted changed the caller's configuration: %s", cfg.Mirror.Helm.Repositories[0].URL)
	}
}
