package registrytest

import (
	"context"
	"testing"
)

// Start starts a registry for the test t and closes it when the test ends.
// It fails the test if the registry cannot start.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	reg, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the test registry: %v", err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Errorf("closing the test registry: %v", err)
		}
	})
	return reg
}
