package serve

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestGeneratedCertificate: the CA is made once; the server certificate is
// kept while it names what is asked, made again by the same CA when a name
// is added, and verifies against ca.crt alone.
func TestGeneratedCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	first, err := generatedCertificate(dir, []string{"localhost", "mirror.example"}, ips)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	again, err := generatedCertificate(dir, []string{"localhost"}, ips)
	if err != nil {
		t.Fatal(err)
	}
	if again.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Error("the server certificate was made again although it names everything asked")
	}
	wider, err := generatedCertificate(dir, []string{"localhost", "other.example"}, ips)
	if err != nil {
		t.Fatal(err)
	}
	if wider.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
		t.Fatal("a new name did not give a new server certificate")
	}
	if now, _ := os.ReadFile(filepath.Join(dir, CAFile)); string(now) != string(ca) {
		t.Error("the CA changed")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	for _, name := range []string{"other.example", "127.0.0.1"} {
		if _, err := wider.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("verifying for %s with ca.crt: %v", name, err)
		}
	}
	for _, f := range []string{caKeyFile, serverKeyFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	// A CA without its key is not silently replaced.
	if err := os.Remove(filepath.Join(dir, caKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := generatedCertificate(dir, []string{"localhost"}, ips); err == nil || !strings.Contains(err.Error(), "restore the key") {
		t.Errorf("CA without key: %v", err)
	}
}

func TestHostNames(t *testing.T) {
	names, ips := hostNames("0.0.0.0", []string{"mirror.example", "10.1.2.3"})
	host, _ := os.Hostname()
	for _, want := range []string{host, "mirror.example", "localhost"} {
		if !slices.Contains(names, want) {
			t.Errorf("names %v lack %s", names, want)
		}
	}
	for _, want := range []string{"10.1.2.3", "127.0.0.1", "::1"} {
		found := false
		for _, ip := range ips {
			found = found || ip.Equal(net.ParseIP(want))
		}
		if !found {
			t.Errorf("addresses %v lack %s", ips, want)
		}
	}
	for _, ip := range ips {
		if ip.IsUnspecified() {
			t.Errorf("addresses %v hold the unspecified address", ips)
		}
	}
}

// TestSetPassword: users are added, a second call changes a password,
// bad names are refused.
func TestSetPassword(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	for _, u := range [][2]string{{"alice", "one"}, {"bob", "two"}, {"alice", "three"}} {
		if err := SetPassword(path, u[0], u[1]); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 entries, got %q", lines)
	}
	hashes := map[string]string{}
	for _, l := range lines {
		u, h, _ := strings.Cut(l, ":")
		hashes[u] = h
	}
	if bcrypt.CompareHashAndPassword([]byte(hashes["alice"]), []byte("three")) != nil || bcrypt.CompareHashAndPassword([]byte(hashes["bob"]), []byte("two")) != nil {
		t.Errorf("entries do not hold the passwords: %q", lines)
	}
	for _, bad := range []string{"", "a:b", PushUser} {
		if err := SetPassword(path, bad, "x"); err == nil {
			t.Errorf("user %q accepted", bad)
		}
	}
	if err := SetPassword(path, "carol", ""); err == nil {
		t.Error("empty password accepted")
	}
}
