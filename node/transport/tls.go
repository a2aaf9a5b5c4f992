package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
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
	log     *slog.Logger // nil until a node uses it (LogTo)
	failed  string       // the reload error last logged; "" when the files load
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

// LogTo makes reload failures visible in log.
func (t *TLS) LogTo(log *slog.Logger) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = log
}

// current returns the certificate and CA to use now. A reload that fails
// keeps the last good files in use, and is logged once per distinct error
// (it repeats at every check until the files are fixed), and once more
// when they load again.
func (t *TLS) current() (*tls.Certificate, *x509.CertPool) {
	err := t.reload(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil && err.Error() != t.failed:
		t.failed = err.Error()
		if t.log != nil {
			t.log.Error("TLS files not reloaded; serving the last good certificate", "err", err)
		}
	case err == nil && t.failed != "":
		t.failed = ""
		if t.log != nil {
			t.log.Info("TLS files reloaded after an earlier failure")
		}
	}
	return t.cert, t.pool
}

// ServerConfig is for the API port, where callers may present a
// certificate signed by the CA (clientAuth says whether they must);
// clients authenticate with tokens.
func (t *TLS) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	return t.serverConfig(clientAuth, []string{"h2", "http/1.1"})
}

// serverConfig serves the current files, offering protos by ALPN.
func (t *TLS) serverConfig(clientAuth tls.ClientAuthType, protos []string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := t.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   clientAuth,
				NextProtos:   protos,
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
			_, pool := t.current()
			return verifyChain(cs, pool)
		},
	}
}
