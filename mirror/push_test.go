package mirror

import (
	"net/http"
	"testing"

	"github.com/gapmirror/gapmirror/registryapi"
)

// TestRegistryClientRetry: what the registry client marks to be sent again
// (Retry: a large blob whose single POST the registry answered with an
// upload session after reading it) is retried by the copy, which reads the
// blob afresh; its other answers keep their classes.
func TestRegistryClientRetry(t *testing.T) {
	for _, c := range []struct {
		err  *registryapi.Error
		want bool
	}{
		{&registryapi.Error{Method: http.MethodPost, Status: http.StatusAccepted, Retry: true, Body: "the registry opened an upload session instead"}, true},
		{&registryapi.Error{Method: http.MethodPost, Status: http.StatusAccepted}, false},
		{&registryapi.Error{Method: http.MethodPut, Status: http.StatusBadRequest, Codes: []string{"DIGEST_INVALID"}}, false},
		{&registryapi.Error{Method: http.MethodPut, Status: http.StatusServiceUnavailable}, true},
	} {
		if got := Transient(explain(c.err, "registry.example/ns/app:v1")); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
