package rpc

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
)

// BenchmarkAuthenticate checks one namespace token (a random one, as
// ns.create makes) from a request's headers against a real node's
// registry: the cost every call pays before its body is read.
// go test -run '^$' -bench Authenticate -count 6 ./rpc
func BenchmarkAuthenticate(b *testing.B) {
	s := single(b)
	token, _ := nstoken.New("app")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := s.n.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: "app", TokenHash: nstoken.Hash(token)}); err != nil {
		b.Fatal(err)
	}
	a := authenticator{b: s.n, unknown: newUnknownTokens(s.n.LinearizableIndex, time.Millisecond, 0), log: slog.New(slog.DiscardHandler)}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.authenticate(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}
