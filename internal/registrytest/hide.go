package registrytest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// hide stands before the registry for Options.HideFromAnonymous: a request
// without credentials finds a registry that answers /v2/ with 200 (no
// challenge to answer, so anonymous access looks allowed) and holds no
// repository at all.
func (r *Registry) hide(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "" {
			next.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.Header().Set("Content-Type", "application/json")
		switch path := strings.TrimSuffix(req.URL.Path, "/"); {
		case path == "/v2":
			w.WriteHeader(http.StatusOK)
			if req.Method != http.MethodHead {
				_, _ = w.Write([]byte("{}"))
			}
		case path == "/v2/_catalog":
			r.hidden.Add(1)
			w.WriteHeader(http.StatusOK)
			if req.Method != http.MethodHead {
				_ = json.NewEncoder(w).Encode(map[string][]string{"repositories": {}})
			}
		default:
			r.hidden.Add(1)
			w.WriteHeader(http.StatusNotFound)
			if req.Method != http.MethodHead {
				_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": "NAME_UNKNOWN", "message": "repository name not known to registry"}}})
			}
		}
	})
}
