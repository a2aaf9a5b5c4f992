package membership

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// metaVersion is the format of a node's gossip metadata; bump it when the
// fields change incompatibly.
const metaVersion = 1

// Meta is what a node tells the others about itself through gossip
// (memberlist NodeMeta, at most 512 bytes).
type Meta struct {
	Version  int    `json:"v"`
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	RaftAddr string `json:"raft"`
	APIAddr  string `json:"api"`
	// Expect is the node's --bootstrap-expect (0 when not bootstrapping).
	Expect int `json:"expect,omitempty"`
	// HasState: the node holds Raft state (part of a cluster already).
	HasState bool `json:"state,omitempty"`
}

func (m Meta) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("membership: node metadata is %d bytes, at most %d", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

func decodeMeta(b []byte) (Meta, bool) {
	var m Meta
	if json.Unmarshal(b, &m) != nil || m.Version != metaVersion || m.ID == "" || m.RaftAddr == "" {
		return Meta{}, false
	}
	return m, true
}
