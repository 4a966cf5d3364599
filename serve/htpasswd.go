package serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// htpasswdFile is the htpasswd file under a root: serve htpasswd --root
// writes it, and a registry serving that root without --htpasswd uses it
// when it is there.
const htpasswdFile = "htpasswd"

// RootHtpasswd is the htpasswd file of root.
func RootHtpasswd(root string) string { return filepath.Join(root, htpasswdFile) }

// checkHtpasswd reads the htpasswd file at path as distribution's htpasswd
// access controller will, and refuses what it would accept but then fail
// every request with: an entry whose hash is not bcrypt (apr1/MD5, SHA1,
// crypt), or a file without users.
func checkHtpasswd(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	users := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(t, ":")
		if !ok {
			return fmt.Errorf("%s line %d: not USER:HASH", path, line)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			kind := "crypt or plain text"
			switch {
			case strings.HasPrefix(hash, "{SHA}"):
				kind = "{SHA}"
			case strings.HasPrefix(hash, "$"):
				if i := strings.Index(hash[1:], "$"); i >= 0 {
					kind = hash[:i+2]
				}
			}
			return fmt.Errorf("%s line %d: user %q: the password hash (%s) is not bcrypt, the only kind the registry accepts: set the password again with: gapmirror serve htpasswd --file %s %s (or htpasswd -B)", path, line, user, kind, path, user)
		}
		users++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if users == 0 {
		return fmt.Errorf("%s holds no users: add one with: gapmirror serve htpasswd --file %s USER", path, path)
	}
	return nil
}

// SetPassword adds user to the htpasswd file at path (made if missing) with
// a bcrypt hash of password, or replaces the user's entry.
func SetPassword(path, user, password string) error {
	if user == "" || strings.ContainsAny(user, ":\n\r") {
		return fmt.Errorf("user name %q: use a non-empty name without ':' or line breaks", user)
	}
	if user == pushUser {
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
