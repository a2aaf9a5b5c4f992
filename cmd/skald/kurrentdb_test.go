package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/skalddb/skald/internal/testutil"
)

// kurrentClient connects KurrentDB's official Go client with the
// connection string url.
func kurrentClient(t *testing.T, url string) *kurrentdb.Client {
	t.Helper()
	cfg, err := kurrentdb.ParseConnectionString(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = func(level kurrentdb.LogLevel, format string, args ...any) {
		t.Logf("client %s: "+format, append([]any{level}, args...)...)
	}
	cl, err := kurrentdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// appendAndRead appends two events to stream through cl and reads them
// back, failing unless they come back as appended.
func appendAndRead(t *testing.T, cl *kurrentdb.Client, stream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs := []kurrentdb.EventData{
		{EventID: uuid.New(), EventType: "Placed", ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{"n":1}`)},
		{EventID: uuid.New(), EventType: "Paid", ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{"n":2}`)},
	}
	res, err := cl.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}}, evs...)
	if err != nil {
		t.Fatal(err)
	}
	if res.NextExpectedVersion != 1 {
		t.Errorf("next expected version %d, want 1", res.NextExpectedVersion)
	}
	rs, err := cl.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var got []string
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %s", ev.Event.EventNumber, ev.Event.EventID, ev.Event.EventType))
	}
	want := []string{"0 " + evs[0].EventID.String() + " Placed", "1 " + evs[1].EventID.String() + " Paid"}
	if !slices.Equal(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
}

// TestKurrentDBServer: skald server --kurrentdb-addr serves KurrentDB's
// clients, bound by --kurrentdb-namespace and saying loudly that it
// authenticates nobody; Gossip names the node at its KurrentDB address.
func TestKurrentDBServer(t *testing.T) {
	var kaddr string
	p := launch(t, t.TempDir(), func(httpAddr, raftAddr string) []string {
		kaddr = testutil.FreeAddr(t)
		return []string{"--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "warn", "--admin-token", testAdmin,
			"--kurrentdb-addr", kaddr, "--kurrentdb-namespace", "default"}
	}, func(p *serverProc) bool { return p.admin(t) })
	if !strings.Contains(p.stderr.String(), "KURRENTDB LISTENER WITHOUT AUTHENTICATION") {
		t.Errorf("no warning that the listener authenticates nobody: %s", p.stderr)
	}
	cl := kurrentClient(t, "kurrentdb://"+kaddr+"?tls=false")
	appendAndRead(t, cl, "order-1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	members, err := cl.Gossip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].GetState().String() != "Leader" ||
		fmt.Sprintf("%s:%d", members[0].GetHttpEndPoint().GetAddress(), members[0].GetHttpEndPoint().GetPort()) != kaddr {
		t.Errorf("gossip %v, want the one node as Leader at %s", members, kaddr)
	}
	// The namespace is the admin namespace: what the client appended is
	// there for the Skald CLI too.
	out, errOut, code := runCLI(t, []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}, "read", "order-1")
	if code != 0 || !strings.Contains(out, "Placed") || !strings.Contains(out, "Paid") {
		t.Errorf("skald read order-1: exit %d, %s %s; want both events", code, out, errOut)
	}
}

// TestKurrentDBDev: every skald dev node serves KurrentDB's protocol at
// --kurrentdb-port+10i, Gossip names all of them, and a client that
// discovers the cluster from any node appends and reads.
func TestKurrentDBDev(t *testing.T) {
	base := freeBlock(t, 3)
	out := startDev(t, base, "--nodes", "3", "--dir", t.TempDir())
	kport := base + 3 // startDev's --kurrentdb-port, inside the free block
	hint := fmt.Sprintf("KurrentDB clients: kurrentdb://127.0.0.1:%d?tls=false", kport)
	if !strings.Contains(out.String(), hint) {
		t.Errorf("dev output lacks %q: %s", hint, out)
	}
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("127.0.0.1:%d", kport+10*i))
	}
	cl := kurrentClient(t, "kurrentdb+discover://"+want[2]+"?tls=false")
	testutil.Until(t, 30*time.Second, "gossip to name every node and a leader", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		members, err := cl.Gossip(ctx)
		if err != nil {
			return false, err.Error()
		}
		var got []string
		leaders := 0
		for _, m := range members {
			got = append(got, fmt.Sprintf("%s:%d", m.GetHttpEndPoint().GetAddress(), m.GetHttpEndPoint().GetPort()))
			if m.GetState().String() == "Leader" {
				leaders++
			}
		}
		slices.Sort(got)
		return slices.Equal(got, want) && leaders == 1, fmt.Sprintf("members %v (%d leaders), want %v", got, leaders, want)
	})
	appendAndRead(t, cl, "order-1")
}

// TestKurrentDBServerTLS: with the API's certificates the KurrentDB
// listener serves TLS and authenticates each call by its Basic
// credential (the admin namespace's initial credential here).
func TestKurrentDBServerTLS(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCLI(t, nil, "tls", "init", "--dir", dir, "--nodes", "1", "--hosts", "127.0.0.1"); code != 0 {
		t.Fatalf("tls init: %s", errOut)
	}
	ca := filepath.Join(dir, "ca.pem")
	var kaddr string
	launch(t, t.TempDir(), func(httpAddr, raftAddr string) []string {
		kaddr = testutil.FreeAddr(t)
		return []string{"--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "warn", "--admin-token", testAdmin,
			"--tls-cert", filepath.Join(dir, "node0.pem"), "--tls-key", filepath.Join(dir, "node0-key.pem"), "--tls-ca", ca,
			"--kurrentdb-addr", kaddr}
	}, func(p *serverProc) bool {
		env := []string{"SKALD_ADDR=https://" + p.addr, "SKALD_TOKEN=" + testAdmin, "SKALD_CA=" + ca}
		_, _, code := runCLI(t, env, "ns", "list")
		return code == 0
	})
	cl := kurrentClient(t, "kurrentdb://initial:"+testAdmin+"@"+kaddr+"?tls=true&tlsCAFile="+ca)
	appendAndRead(t, cl, "order-1")
	anonymous := kurrentClient(t, "kurrentdb://"+kaddr+"?tls=true&tlsCAFile="+ca)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := anonymous.AppendToStream(ctx, "order-2", kurrentdb.AppendToStreamOptions{},
		kurrentdb.EventData{EventType: "A", ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{}`)})
	var e *kurrentdb.Error
	if !errors.As(err, &e) || e.Code() != kurrentdb.ErrorCodeUnauthenticated {
		t.Errorf("an append without credentials: %v, want unauthenticated", err)
	}
}
