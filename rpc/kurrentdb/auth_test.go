package kurrentdb

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
)

// TestCredentials: over TLS a call acts for the Skald credential its
// Basic user:password names (credential name, token), with its role.
func TestCredentials(t *testing.T) {
	f := start(t, 1, secureMode)
	owner := tlsClient(t, f.leader, "initial", f.owner)
	reader := tlsClient(t, f.leader, readerName, f.reader)
	ev := jsonEvent("Opened", `{"account":1}`)
	if _, err := owner.AppendToStream(ctxT(t), "account-1", kurrentdb.AppendToStreamOptions{}, ev); err != nil {
		t.Fatalf("the owner's append: %v", err)
	}
	evs, err := readStream(t, reader, "account-1", kurrentdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatalf("the reader's read: %v", err)
	}
	if len(evs) != 1 || evs[0].Event.EventID != ev.EventID {
		t.Fatalf("the reader read %d events, want the one appended", len(evs))
	}
	for _, c := range []struct {
		name string
		cl   *kurrentdb.Client
		code kurrentdb.ErrorCode
		says string
	}{
		{"a reader appends", reader, kurrentdb.ErrorCodeAccessDenied, "it needs the writer role"},
		{"a wrong token", tlsClient(t, f.leader, "initial", wrongSecret(f.owner)),
			kurrentdb.ErrorCodeUnauthenticated, "wrong token"},
		{"the token under another name", tlsClient(t, f.leader, readerName, f.owner),
			kurrentdb.ErrorCodeUnauthenticated, "unknown user name or wrong token"},
		{"no credentials", tlsClient(t, f.leader, "", ""), kurrentdb.ErrorCodeUnauthenticated, "no credentials"},
	} {
		_, err := c.cl.AppendToStream(ctxT(t), "account-1", kurrentdb.AppendToStreamOptions{},
			jsonEvent("Closed", `{"account":1}`))
		if err == nil {
			t.Fatalf("%s: appended", c.name)
		}
		if code := errorCode(t, err); code != c.code || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v (code %d), want code %d saying %q", c.name, err, code, c.code, c.says)
		}
	}
	for name, del := range map[string]func() error{
		"delete": func() error {
			_, err := reader.DeleteStream(ctxT(t), "account-1", kurrentdb.DeleteStreamOptions{StreamState: kurrentdb.Any{}})
			return err
		},
		"tombstone": func() error {
			opts := kurrentdb.TombstoneStreamOptions{StreamState: kurrentdb.Any{}}
			_, err := reader.TombstoneStream(ctxT(t), "account-1", opts)
			return err
		},
	} {
		err := del()
		code := errorCode(t, err)
		if code != kurrentdb.ErrorCodeAccessDenied || !strings.Contains(err.Error(), "owner role") {
			t.Errorf("a reader's %s: %v, want access denied: it needs the owner role", name, err)
		}
	}
	evs, err = readStream(t, owner, "account-1", kurrentdb.ReadStreamOptions{}, 10)
	if err != nil || len(evs) != 1 {
		t.Errorf("after the refused calls the stream holds %d events (%v), want 1", len(evs), err)
	}
}

// TestBearer: a Bearer token authenticates as its credential.
func TestBearer(t *testing.T) {
	f := start(t, 1, secureMode)
	cfg, err := kurrentdb.ParseConnectionString("kurrentdb://" + f.leader.addr + "?tls=true&tlsverifycert=false")
	if err != nil {
		t.Fatal(err)
	}
	cfg.CredentialsProvider = bearer(f.reader)
	cl := dial(t, cfg)
	_, err = cl.AppendToStream(ctxT(t), "account-2", kurrentdb.AppendToStreamOptions{}, jsonEvent("Opened", `{}`))
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeAccessDenied {
		t.Errorf("a reader's bearer append: %v, want access denied", err)
	}
	_, err = readStream(t, cl, "account-2", kurrentdb.ReadStreamOptions{}, 10)
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
		t.Errorf("a reader's bearer read of a missing stream: %v, want not found (authenticated)", err)
	}
}

// bearer is a credentials provider sending token as Bearer.
func bearer(token string) kurrentdb.CredentialsProvider {
	return func(context.Context) (*kurrentdb.Credentials, error) {
		return &kurrentdb.Credentials{BearerToken: token}, nil
	}
}

// wrongSecret is token with the last digit of its secret changed.
func wrongSecret(token string) string {
	last := "0"
	if strings.HasSuffix(token, "0") {
		last = "1"
	}
	return token[:len(token)-1] + last
}

// TestBoundNamespaceMissing: a listener bound to a namespace that does
// not exist says so, not that the caller's credential is wrong.
func TestBoundNamespaceMissing(t *testing.T) {
	f := start(t, 1, insecureMode)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, f.leader.tn, ln, nil, Options{Namespace: "nope"})
	cl := insecureClient(t, &member{tn: f.leader.tn, addr: ln.Addr().String()})
	_, err = cl.AppendToStream(ctxT(t), "x-1", kurrentdb.AppendToStreamOptions{}, jsonEvent("A", `{}`))
	want := `namespace "nope", which this listener is bound to (--kurrentdb-namespace), does not exist`
	if err == nil || !strings.Contains(err.Error(), "FailedPrecondition") || !strings.Contains(err.Error(), want) {
		t.Errorf("append: %v, want FailedPrecondition saying %q", err, want)
	}
	_, err = readStream(t, cl, "x-1", kurrentdb.ReadStreamOptions{}, 10)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("read: %v, want %q", err, want)
	}
}

// TestScope: a scoped credential appends and reads the streams of its
// scope only, and never $all.
func TestScope(t *testing.T) {
	f := start(t, 1, secureMode)
	cl := tlsClient(t, f.leader, ordersName, f.orders)
	appendN(t, cl, "order-1", 1)
	if evs, err := readStream(t, cl, "order-1", kurrentdb.ReadStreamOptions{}, 10); err != nil || len(evs) != 1 {
		t.Fatalf("read in scope: %d events (%v), want 1", len(evs), err)
	}
	_, err := cl.AppendToStream(ctxT(t), "account-1", kurrentdb.AppendToStreamOptions{}, jsonEvent("A", `{}`))
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeAccessDenied ||
		!strings.Contains(err.Error(), "outside the credential's scope") {
		t.Errorf("append outside the scope: %v, want access denied", err)
	}
	_, err = readStream(t, cl, "account-1", kurrentdb.ReadStreamOptions{}, 10)
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeAccessDenied {
		t.Errorf("read outside the scope: %v, want access denied", err)
	}
	rs, err := cl.ReadAll(ctxT(t), kurrentdb.ReadAllOptions{}, 10)
	if err == nil {
		defer rs.Close()
		_, err = rs.Recv()
	}
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeAccessDenied || !strings.Contains(err.Error(), "unscoped") {
		t.Errorf("read of $all: %v, want access denied saying it needs an unscoped credential", err)
	}
}
