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

// TestHostNames: the certificate names the listening host or address,
// this machine's host name whatever the address, the interface addresses
// on 0.0.0.0, loopback and the extra names.
func TestHostNames(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host         string
		extra        []string
		names, addrs []string
	}{
		{"0.0.0.0", []string{"mirror.example", "10.1.2.3"}, []string{host, "mirror.example", "localhost"}, []string{"10.1.2.3", "127.0.0.1", "::1"}},
		{"192.0.2.7", nil, []string{host, "localhost"}, []string{"192.0.2.7", "127.0.0.1", "::1"}},
		{"127.0.0.1", nil, []string{host, "localhost"}, []string{"127.0.0.1", "::1"}},
		{"mirror.example", nil, []string{"mirror.example", host, "localhost"}, []string{"127.0.0.1", "::1"}},
	} {
		names, ips := hostNames(tc.host, tc.extra)
		for _, want := range tc.names {
			if !slices.Contains(names, want) {
				t.Errorf("%s: names %v lack %s", tc.host, names, want)
			}
		}
		for _, want := range tc.addrs {
			if !slices.ContainsFunc(ips, net.ParseIP(want).Equal) {
				t.Errorf("%s: addresses %v lack %s", tc.host, ips, want)
			}
		}
		if slices.ContainsFunc(ips, net.IP.IsUnspecified) {
			t.Errorf("%s: addresses %v hold the unspecified address", tc.host, ips)
		}
		if tc.host == "0.0.0.0" && names[0] != "mirror.example" {
			t.Errorf("the certificate's first name (its common name) is %s, want the --hostname mirror.example", names[0])
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
	for _, bad := range []string{"", "a:b", pushUser} {
		if err := SetPassword(path, bad, "x"); err == nil {
			t.Errorf("user %q accepted", bad)
		}
	}
	if err := SetPassword(path, "carol", ""); err == nil {
		t.Error("empty password accepted")
	}
}

// TestCheckHtpasswd: bcrypt entries (and comments, blank lines) pass; any
// other hash, a line without a hash or a file without users is refused
// naming the file and line (and user).
func TestCheckHtpasswd(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := SetPassword(good, "alice", "s3cret"); err != nil {
		t.Fatal(err)
	}
	entry, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, append([]byte("# users\n\n"), entry...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkHtpasswd(good); err != nil {
		t.Errorf("bcrypt entries refused: %v", err)
	}
	for _, tc := range []struct {
		body string
		want []string
	}{
		{string(entry) + "bob:$apr1$9Cv/OMGj$ox/CVna9EPX4B25GEg6y9.\n", []string{"line 2", `user "bob"`, "($apr1$)", "not bcrypt"}},
		{"carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", []string{"line 1", `user "carol"`, "({SHA})"}},
		{"dave:ab01FAX.bQRSU\n", []string{"line 1", `user "dave"`, "(crypt or plain text)"}},
		{"# nobody\n", []string{"holds no users"}},
		{"erin\n", []string{"line 1", "not USER:HASH"}},
	} {
		path := filepath.Join(dir, "bad")
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		err := checkHtpasswd(path)
		for _, want := range append(tc.want, path) {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v, want it refused saying %q", tc.body, err, want)
			}
		}
		if err != nil && strings.Contains(err.Error(), "ox/CVna9") {
			t.Errorf("the error shows the hash: %v", err)
		}
	}
}

// TestConfigurationEnvironment: the containers tools' REGISTRY_AUTH_FILE
// (which gapmirror's users set) does not reach the registry's
// configuration; overrides go by envPrefix, and the defaults of a parsed
// file apply.
func TestConfigurationEnvironment(t *testing.T) {
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv(envPrefix+"_CATALOG_MAXENTRIES", "7")
	root := t.TempDir()
	cfg, _, err := parseConfiguration(root, "")
	if err != nil {
		t.Fatalf("default configuration with REGISTRY_AUTH_FILE set: %v", err)
	}
	if len(cfg.Auth) != 0 || cfg.Catalog.MaxEntries != 7 || cfg.Tags.MaxTags != 1000 || cfg.Log.Level != "info" {
		t.Errorf("auth %v, catalog %d, tags %d, log %q; want no auth, 7 (from the environment), 1000, info",
			cfg.Auth, cfg.Catalog.MaxEntries, cfg.Tags.MaxTags, cfg.Log.Level)
	}
	file := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(file, []byte("version: 0.1\nstorage:\n  inmemory: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err = parseConfiguration(root, file); err != nil || cfg.Storage.Type() != "inmemory" || cfg.Catalog.MaxEntries != 7 {
		t.Errorf("--registry-config: %v, %+v", err, cfg)
	}
	if err := os.WriteFile(file, []byte("version: 0.1\nlog: {level: debug}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err = parseConfiguration(root, file); err == nil || !strings.Contains(err.Error(), "storage") {
		t.Errorf("a configuration without storage: %v, want an error naming the storage", err)
	}
}
