package transport

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Creds are the mutual-TLS credentials of the cluster port: every
// member presents a certificate the others trust, and trusts only such
// certificates.
type Creds interface {
	// serverTLS is for accepting: it requires a client certificate and
	// verifies it. protos are the ALPN protocols offered.
	serverTLS(protos []string) *tls.Config
	// clientTLS is for dialing: it presents this node's certificate and
	// verifies the peer's chain. protos are the ALPN protocols asked
	// for, in order of preference.
	clientTLS(protos ...string) *tls.Config
}

// secretCreds are cluster credentials derived from the cluster secret, so
// that a shared secret alone (the gossip key, or --cluster-secret) gives
// mutual TLS with no PKI to manage.
//
// Every member derives the same CA key from the secret (HKDF-SHA256 to an
// Ed25519 seed) and signs a fresh certificate for a fresh key of its own at
// start; a peer is trusted when its chain ends at that CA. Knowing the
// secret is what membership means: the CA key is never stored or sent, and
// a process without the secret can neither present an accepted
// certificate nor accept a member's connection (members verify the server
// side too).
type secretCreds struct {
	leaf tls.Certificate
	pool *x509.CertPool
}

// caInfo is the HKDF info of the CA key. Changing it changes every
// member's CA: all members must agree on it.
const caInfo = "skald cluster CA v1 (ed25519)"

// deriveCA returns the cluster CA's key and certificate for secret. The key
// is a pure function of the secret; the certificate's fields are fixed, so
// every member builds the same CA.
func deriveCA(secret string) (ed25519.PrivateKey, *x509.Certificate, error) {
	if secret == "" {
		return nil, nil, errors.New("node: no cluster secret to derive the cluster CA from")
	}
	seed, err := hkdf.Key(sha256.New, []byte(secret), nil, caInfo, ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("node: derive the cluster CA key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	skid := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Skald cluster CA (derived from the cluster secret)"},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
		SubjectKeyId:          skid[:20],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, nil, fmt.Errorf("node: build the cluster CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("node: parse the cluster CA: %w", err)
	}
	return key, ca, nil
}

// NewSecretCreds derives the CA from secret and issues this node's
// certificate (a new key each start; nothing is written to disk).
func NewSecretCreds(secret, nodeID string) (Creds, error) {
	caKey, ca, err := deriveCA(secret)
	if err != nil {
		return nil, err
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("node: generate the node key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "skald node " + nodeID},
		NotBefore:    now.Add(-24 * time.Hour), // members' clocks differ
		NotAfter:     now.AddDate(20, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("node: issue the node certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &secretCreds{
		leaf: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pool: pool,
	}, nil
}

func (c *secretCreds) serverTLS(protos []string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.leaf},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.pool,
		NextProtos:   protos,
	}
}

func (c *secretCreds) clientTLS(protos ...string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.leaf},
		NextProtos:   protos,
		// Members are named by address and addresses change: the chain is
		// verified against the cluster CA, not the host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs, c.pool)
		},
	}
}

// verifyChain checks that the peer's certificate chains to a CA in pool
// and may serve.
func verifyChain(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("node: peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("node: peer certificate not signed by the cluster CA: %w", err)
	}
	return nil
}

// FileCreds are the operator's own certificates (--tls-*), reloaded as
// the files change.
func FileCreds(t *TLS) Creds { return fileCreds{t} }

type fileCreds struct{ t *TLS }

func (c fileCreds) serverTLS(protos []string) *tls.Config {
	return c.t.serverConfig(tls.RequireAndVerifyClientCert, protos)
}

func (c fileCreds) clientTLS(protos ...string) *tls.Config {
	cfg := c.t.ClientConfig()
	cfg.NextProtos = protos
	return cfg
}
