package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files of the generated certificate authority and server certificate
// under ROOT/tls. Keys end in .pem, not .key, so that the directory itself
// works as a containers certs.d directory (--dest-cert-dir ROOT/tls), where
// every *.crt is a trusted CA and a *.key would be taken for a client key.
const (
	CAFile         = "ca.crt"
	caKeyFile      = "ca-key.pem"
	serverCertFile = "server.crt"
	serverKeyFile  = "server-key.pem"
)

const (
	caValidity     = 10 * 365 * 24 * time.Hour
	serverValidity = 397 * 24 * time.Hour
	// renewBefore: a server certificate this close to expiry is made anew at start.
	renewBefore = 30 * 24 * time.Hour
)

// generatedCertificate loads the CA and server certificate under dir,
// making the CA once and the server certificate again whenever it does not
// cover names and ips, is near expiry or was not signed by the CA.
func generatedCertificate(dir string, names []string, ips []net.IP) (tls.Certificate, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("creating the TLS directory: %w", err)
	}
	ca, caKey, err := loadOrCreateCA(dir)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPath, keyPath := filepath.Join(dir, serverCertFile), filepath.Join(dir, serverKeyFile)
	if cert, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && covers(cert.Leaf, ca, names, ips) {
		return cert, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the server key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[0], Organization: []string{"gapmirror serve"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(serverValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("signing the server certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	// The chain goes with the certificate so clients given only the CA verify it.
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})...)
	if err := writeFile(certPath, chain, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(certPath, keyPath)
}

// covers reports whether leaf is signed by ca, valid for a while yet and
// names every one of names and ips.
func covers(leaf, ca *x509.Certificate, names []string, ips []net.IP) bool {
	if leaf == nil || time.Until(leaf.NotAfter) < renewBefore || leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	for _, n := range names {
		if !slices.Contains(leaf.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func loadOrCreateCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, caKeyFile)
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	switch {
	case err == nil:
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok || pair.Leaf == nil || !pair.Leaf.IsCA {
			return nil, nil, fmt.Errorf("%s is not a CA certificate with an ECDSA key (%s): move both away to have new ones made", certPath, keyPath)
		}
		return pair.Leaf, key, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, nil, fmt.Errorf("reading the CA %s and %s: %w (move both away to have new ones made; clients then need the new %s)", certPath, keyPath, err, CAFile)
	}
	if _, err := os.Stat(certPath); err == nil {
		return nil, nil, fmt.Errorf("%s is there but its key %s is not: restore the key, or move %s away to have a new CA made (clients then need the new one)", certPath, keyPath, certPath)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	host, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "gapmirror serve CA " + host, Organization: []string{"gapmirror serve"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// writeFile replaces path whole (a crash leaves the old file or the new one).
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// hostNames are the names and addresses a certificate for a registry
// listening on host must carry: host itself (a name, or a specific
// address), extra, this machine's host name (clients on other hosts use
// it, whichever of the machine's addresses the registry listens on), on all
// addresses also the interface addresses, and localhost and loopback.
func hostNames(host string, extra []string) ([]string, []net.IP) {
	var names []string
	var ips []net.IP
	add := func(s string) {
		if s == "" {
			return
		}
		if ip := net.ParseIP(s); ip != nil {
			if !ip.IsUnspecified() && !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		} else if !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	add(host)
	for _, s := range extra {
		add(s)
	}
	if h, err := os.Hostname(); err == nil {
		add(h)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					add(n.IP.String())
				}
			}
		}
	}
	add("localhost")
	add("127.0.0.1")
	add("::1")
	return names, ips
}
