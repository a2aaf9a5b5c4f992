package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// TLSFiles names PEM files: this node's certificate and key, and the CA
// that signs every node's certificate.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// TLS serves certificates from files and reloads them when the files
// change (checked at most once a second, at handshakes), so certificates
// rotate without a restart. Cluster traffic (Raft, node-to-node calls)
// uses mutual TLS: both sides present a certificate signed by the CA.
type TLS struct {
	files TLSFiles

	mu      sync.Mutex
	checked time.Time
	mtimes  [3]time.Time
	cert    *tls.Certificate
	pool    *x509.CertPool
}

// NewTLS loads the files.
func NewTLS(files TLSFiles) (*TLS, error) {
	if files.CertFile == "" || files.KeyFile == "" || files.CAFile == "" {
		return nil, errors.New("node: TLS needs a certificate, its key and the CA")
	}
	t := &TLS{files: files}
	if err := t.reload(true); err != nil {
		return nil, err
	}
	return t, nil
}

// reload rereads the files if they changed (or force).
func (t *TLS) reload(force bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !force && time.Since(t.checked) < time.Second {
		return nil
	}
	t.checked = time.Now()
	var mtimes [3]time.Time
	for i, p := range []string{t.files.CertFile, t.files.KeyFile, t.files.CAFile} {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("node: TLS file: %w", err)
		}
		mtimes[i] = st.ModTime()
	}
	if !force && mtimes == t.mtimes {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(t.files.CertFile, t.files.KeyFile)
	if err != nil {
		return fmt.Errorf("node: load TLS certificate: %w", err)
	}
	caPEM, err := os.ReadFile(t.files.CAFile)
	if err != nil {
		return fmt.Errorf("node: read TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("node: %s holds no PEM certificate", t.files.CAFile)
	}
	t.cert, t.pool, t.mtimes = &cert, pool, mtimes
	return nil
}

func (t *TLS) current() (*tls.Certificate, *x509.CertPool) {
	if err := t.reload(false); err != nil {
		// Keep serving with the last good files; the error repeats on the
		// next check.
		_ = err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cert, t.pool
}

// ServerConfig is for listeners; clientAuth says whether callers must
// present a certificate signed by the CA (cluster traffic) or may (the
// API port, where clients authenticate with tokens).
func (t *TLS) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := t.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   clientAuth,
				NextProtos:   []string{"h2", "http/1.1"},
			}, nil
		},
	}
}

// ClientConfig is for dialing other nodes: it presents this node's
// certificate and accepts a peer whose certificate the CA signed. Peers
// are named by address, and addresses change, so the chain is verified
// but not the host name.
func (t *TLS) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := t.current()
			return cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("node: peer presented no certificate")
			}
			_, pool := t.current()
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if err != nil {
				return fmt.Errorf("node: peer certificate not signed by the cluster CA: %w", err)
			}
			return nil
		},
	}
}

// tlsStreamLayer is a raft.StreamLayer over mutual TLS.
type tlsStreamLayer struct {
	net.Listener
	advertise net.Addr
	t         *TLS
}

func newTLSStreamLayer(bind, advertise string, t *TLS) (*tlsStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("node: raft listener on %s: %w", bind, err)
	}
	adv := ln.Addr()
	if advertise != "" {
		if adv, err = net.ResolveTCPAddr("tcp", advertise); err != nil {
			ln.Close()
			return nil, fmt.Errorf("node: raft advertise address %q: %w", advertise, err)
		}
	}
	if a, ok := adv.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("node: raft address %s is not advertisable: set the advertise address", adv)
	}
	return &tlsStreamLayer{Listener: tls.NewListener(ln, t.ServerConfig(tls.RequireAndVerifyClientCert)), advertise: adv, t: t}, nil
}

func (l *tlsStreamLayer) Addr() net.Addr { return l.advertise }

func (l *tlsStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), l.t.ClientConfig())
	if err != nil {
		return nil, err
	}
	return conn, nil
}
