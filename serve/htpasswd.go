package serve

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// SetPassword adds user to the htpasswd file at path (made if missing) with
// a bcrypt hash of password, or replaces the user's entry.
func SetPassword(path, user, password string) error {
	if user == "" || strings.ContainsAny(user, ":\n\r") {
		return fmt.Errorf("user name %q: use a non-empty name without ':' or line breaks", user)
	}
	if user == PushUser {
		return fmt.Errorf("user name %q is reserved for gapmirror serve's own push: choose another", user)
	}
	if password == "" {
		return errors.New("empty password: give the password on standard input")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hashing the password: %w", err) // e.g. over 72 bytes
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, user+":") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, user+":"+string(hash))
	return writeFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}
