package spelling

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"stable-4.18", "stable-4.18", 0},
		{"stable-4.81", "stable-4.18", 2},
		{"stabel-4.18", "stable-4.18", 2},
		{"fast", "", 4},
		{"kitten", "sitting", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
