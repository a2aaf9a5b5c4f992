package client

import (
	"context"
	"encoding/base64"
	"math"
	"strings"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// retryWindow is how long after an append's first try an unknown outcome
// may still be retried with the same ids: half the namespace's dedupe
// window, so the retry's entry time (stamped by whichever leader takes
// it) stays inside the window with room for clock differences between
// leaders. Forever: until the caller's context ends. Zero when the
// namespace does not remember ids (dedupe off, or a server too old to
// report a window) or the window cannot be learned now; then the caller
// gets ErrUnknownOutcome, as without idempotent writes. A namespace's
// window is fixed at its creation, so the first answer is kept.
func (c *Client) retryWindow(ctx context.Context) time.Duration {
	if w := c.dedupe.Load(); w != nil {
		return *w
	}
	name, ok := tokenNamespace(c.cfg.Token)
	if !ok {
		return 0
	}
	var info *skaldv1.NamespaceInfo
	err := c.internalRead(ctx, func(ctx context.Context, m *member) error {
		r, err := m.namespaces.Get(ctx, connect.NewRequest(&skaldv1.GetRequest{Name: name}))
		if err == nil {
			info = r.Msg
		}
		return err
	})
	if err != nil {
		return 0
	}
	var w time.Duration
	switch {
	case info.DedupeForever:
		w = math.MaxInt64
	case info.DedupeWindow != nil:
		w = info.DedupeWindow.AsDuration() / 2
	}
	c.dedupe.Store(&w)
	return w
}

// tokenNamespace is the namespace a token names: ns_<base64url(name)>_<secret>
// (the secret is hex, so the last '_' ends the name).
func tokenNamespace(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, "ns_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i < 0 {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(rest[:i])
	if err != nil || len(name) == 0 {
		return "", false
	}
	return string(name), true
}
