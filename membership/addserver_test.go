package membership

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// refusingNode answers AddNonvoter with err; addServer calls nothing else.
type refusingNode struct {
	Node
	err   error
	calls int
}

func (n *refusingNode) AddNonvoter(context.Context, string, string) error {
	n.calls++
	return n.err
}

// A server whose add keeps failing the same way (a joiner the leader
// refuses as too old) is retried on every reconcile but warned about once
// per addFailureLogEvery; a new error warns at once; success says how many
// attempts failed and forgets them.
func TestAddServerFailureLogging(t *testing.T) {
	var logs bytes.Buffer
	node := &refusingNode{err: errors.New("node: joining server runs an older version")}
	m := &Membership{node: node, log: slog.New(slog.NewTextHandler(&logs, nil))}
	mem := member{Meta: Meta{ID: "n4", Name: "four", RaftAddr: "127.0.0.1:1"}}
	warnings := func() int { return strings.Count(logs.String(), "level=WARN") }

	for range 10 {
		m.addServer(context.Background(), mem)
	}
	if node.calls != 10 || warnings() != 1 || strings.Count(logs.String(), "adding server as non-voter") != 1 {
		t.Fatalf("10 refused attempts: %d calls, %d warnings, log:\n%s", node.calls, warnings(), logs.String())
	}
	m.addFailed["n4"].logged = time.Now().Add(-addFailureLogEvery)
	m.addServer(context.Background(), mem)
	if warnings() != 2 || !strings.Contains(logs.String(), "attempts=11") {
		t.Fatalf("after addFailureLogEvery: %d warnings, log:\n%s", warnings(), logs.String())
	}
	node.err = errors.New("node: not the leader")
	m.addServer(context.Background(), mem)
	if warnings() != 3 || !strings.Contains(logs.String(), "not the leader") {
		t.Fatalf("a different error: %d warnings, log:\n%s", warnings(), logs.String())
	}
	node.err = nil
	m.addServer(context.Background(), mem)
	if !strings.Contains(logs.String(), "after failed attempts") || m.addFailed["n4"] != nil {
		t.Fatalf("success: failures %v, log:\n%s", m.addFailed, logs.String())
	}
	m.addServer(context.Background(), mem)
	if strings.Count(logs.String(), "adding server as non-voter") != 2 {
		t.Fatalf("a fresh add after success logs as new:\n%s", logs.String())
	}
}
