package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skalddb/skald/internal/logbridge"
	"github.com/skalddb/skald/node/transport"
)

// serveMetrics serves GET /metrics on a listener of its own at addr
// (--metrics-addr), every series and no token, as etcd's
// --listen-metrics-urls and NATS's monitoring port do: the operator binds
// it where only the monitoring network reaches, and Prometheus needs no
// credential. HTTPS with the node's certificate when tlsFiles is set. The
// API port's /metrics stays (the console reads it). stop closes it.
func serveMetrics(
	addr string, g prometheus.Gatherer, tlsFiles *transport.TLS, log *slog.Logger,
) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          logbridge.Std(log, "http", slog.LevelWarn),
	}
	go func() {
		var err error
		if tlsFiles != nil {
			srv.TLSConfig = tlsFiles.ServerConfig(tls.VerifyClientCertIfGiven)
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "metrics-addr", ln.Addr().String(), "err", err)
		}
	}()
	log.Info("serving metrics", "metrics-addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}
