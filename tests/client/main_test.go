package client_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/skalddb/skald/client"

	"github.com/skalddb/skald/tests/testcluster"
)

// endpoints and adminToken are those of a 3-node cluster shared by the
// examples and the black-box tests, started by TestMain.
var (
	endpoints  []string
	adminToken = testcluster.AdminToken
)

func TestMain(m *testing.M) {
	var main testcluster.Main
	cl := testcluster.Start(&main, 3)
	endpoints = cl.Endpoints()
	code := m.Run()
	main.Close()
	os.Exit(code)
}

// runs numbers the namespaces of the tests and examples: with -count=N
// they run N times against the same cluster.
var runs atomic.Int64

// exampleNamespace creates a new namespace named after name for one
// example and returns a client with its token.
func exampleNamespace(ctx context.Context, name string) *client.Client {
	admin, err := client.New(ctx, client.Config{Endpoints: endpoints, Token: adminToken})
	if err != nil {
		panic(err)
	}
	defer admin.Close()
	ns, err := admin.CreateNamespace(ctx, fmt.Sprintf("%s-%d", name, runs.Add(1)), "", "")
	if err != nil {
		panic(err)
	}
	c, err := client.New(ctx, client.Config{Endpoints: endpoints, Token: ns.Token})
	if err != nil {
		panic(err)
	}
	return c
}
