package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/node/transport"
	"github.com/skalddb/skald/rpc"
	"github.com/skalddb/skald/rpc/kurrentdb"
)

// kurrentDBFlags are the flags of the KurrentDB listener.
type kurrentDBFlags struct {
	addr, advertise, namespace string
}

// serveKurrentDB serves KurrentDB's client protocol (rpc/kurrentdb) on a
// listener of its own at f.addr (--kurrentdb-addr): over TLS with the
// API's certificate when tlsFiles is set, else h2c, with the API's
// limits, tracing and connection caps (conns, which the API's listener
// shares). api is this node's API address as the cluster knows it. stop
// ends it and waits.
func serveKurrentDB(f kurrentDBFlags, n *node.Node, api string, apiOpt rpc.Options, conns *rpc.ConnCaps,
	tlsFiles *transport.TLS, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --kurrentdb-addr: %w", err)
	}
	advertise := f.advertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	log = log.With("kurrentdb-addr", ln.Addr().String())
	srv, err := kurrentdb.New(rpc.NewLocal(n, apiOpt), n, kurrentdb.Options{
		Logger: log, Namespace: f.namespace, Advertise: advertise, API: api, Registerer: apiOpt.Registerer,
		Limits: apiOpt.Limits, Connections: conns, TracerProvider: apiOpt.TracerProvider,
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	var cfg *tls.Config
	if tlsFiles != nil {
		cfg = tlsFiles.ServerConfig(tls.VerifyClientCertIfGiven)
	}
	switch {
	case f.namespace != "":
		log.Warn("KURRENTDB LISTENER WITHOUT AUTHENTICATION: every client that reaches --kurrentdb-addr "+
			"acts on the namespace as its owner, whatever credentials it sends; bind it where only trusted "+
			"clients reach", "namespace", f.namespace, "tls", cfg != nil)
	case cfg == nil:
		log.Warn("the KurrentDB listener is h2c and needs credentials, which the official clients send only " +
			"over TLS: start the server with --tls-cert, or bind the listener to a namespace with --kurrentdb-namespace")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln, cfg); err != nil {
			log.Error("kurrentdb server", "err", err)
		}
	}()
	log.Info("serving KurrentDB's protocol", "advertise", advertise, "tls", cfg != nil)
	return func() { cancel(); <-done }, nil
}
