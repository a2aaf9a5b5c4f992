package server

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/nstoken"
)

// serverSecretFiles returns the file twins of skald server's secret flags,
// bound to f's fields.
func serverSecretFiles(f *serverFlags) []*command.SecretFile {
	return []*command.SecretFile{
		{Name: "admin-token", Value: &f.adminToken, Check: checkAdminToken},
		{Name: "gossip-key", Value: &f.gossipKey, Check: checkGossipKey},
		{Name: "cluster-secret", Value: &f.clusterSecret},
	}
}

// checkAdminToken accepts only a token of the admin namespace.
func checkAdminToken(s string) error {
	if name, err := nstoken.Parse(s); err != nil || name != nstoken.AdminNamespace {
		return fmt.Errorf("not a token of the %q namespace (ns_ZGVmYXVsdA_<64 hex>)", nstoken.AdminNamespace)
	}
	return nil
}

// checkGossipKey accepts base64 of 16, 24 or 32 bytes, as memberlist
// needs.
func checkGossipKey(s string) error {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return errors.New("not base64")
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("%d bytes, want 16, 24 or 32", n)
	}
	return nil
}
