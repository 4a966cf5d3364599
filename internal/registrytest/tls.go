package registrytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// certificate is a self-signed server certificate that is its own CA.
type certificate struct {
	tls     tls.Certificate
	certPEM []byte
	pool    *x509.CertPool
}

// newSelfSignedCertificate makes a certificate for 127.0.0.1, ::1 and localhost.
func newSelfSignedCertificate() (*certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("registrytest: generating the TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("registrytest: generating the certificate serial: %w", err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "registrytest 127.0.0.1", Organization: []string{"gapmirror tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("registrytest: creating the certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("registrytest: parsing the certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &certificate{
		tls:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pool:    pool,
	}, nil
}

// serverConfig is the server side TLS configuration.
func (c *certificate) serverConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.tls}, MinVersion: tls.VersionTLS12}
}

// clientConfig trusts only this certificate.
func (c *certificate) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
}
