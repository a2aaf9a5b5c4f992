package client_test

import (
	"os"
	"testing"

	"github.com/skalddb/skald/client/internal/testcluster"
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
