package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestIndexes creates an index through the client, and reads it back
// after each write on whichever member the round robin picks: at the
// default (session) and linearizable consistency every page holds the
// write acknowledged just before.
func TestIndexes(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	c := namespaceClient(t, admin, cl.Endpoints(), "shop")
	d, err := c.CreateIndex(ctxT(t), "", &skaldv1.IndexDefinition{Name: "by-sku", Types: []string{"Sold"}, Fields: []*skaldv1.IndexField{
		{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/sku", Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING},
	}})
	if err != nil || d.Name != "by-sku" || d.GetCreated() == nil {
		t.Fatalf("create index: %v, %v", d, err)
	}
	for i := range 12 {
		data, _ := json.Marshal(map[string]any{"sku": fmt.Sprintf("sku-%d", i%4)})
		res, err := c.Append(ctxT(t), fmt.Sprintf("order-%d", i), []client.NewMessage{{Type: "Sold", Data: data}})
		if err != nil {
			t.Fatal(err)
		}
		opts := []client.ReadOption{}
		if i%2 == 1 {
			opts = append(opts, client.WithLinearizable())
		}
		page, err := c.QueryIndex(ctxT(t), "", client.IndexQuery{Name: "by-sku", Equal: []string{fmt.Sprintf("sku-%d", i%4)}, Descending: true, Limit: 1}, opts...)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if len(page.Hits) != 1 || page.Hits[0].GlobalPosition != res.FirstGlobalPosition || page.Hits[0].Message == nil || page.Hits[0].Message.Stream != fmt.Sprintf("order-%d", i) {
			t.Fatalf("after write %d (global position %d) the newest entry is %+v", i, res.FirstGlobalPosition, page.Hits)
		}
	}
	page, err := c.QueryIndex(ctxT(t), "", client.IndexQuery{Name: "by-sku", Prefix: ptr("sku-1"), PositionsOnly: true})
	if err != nil || len(page.Hits) != 3 || page.Hits[0].Values[0] != "sku-1" || page.NextCursor != nil {
		t.Fatalf("prefix query: %+v, %v", page, err)
	}
	// A listing reports progress without waiting for the index: the
	// answering node's count reaches 12 once its index loop catches up.
	testutil.Until(t, 10*time.Second, "the listing shows all 12 entries", func() (bool, string) {
		infos, err := c.Indexes(ctxT(t), "")
		if err != nil || len(infos) != 1 {
			return false, fmt.Sprintf("indexes: %v, %v", infos, err)
		}
		st := infos[0].Status
		return st.Entries == 12 && st.LagEvents == 0, fmt.Sprintf("status %v", st)
	})
	// A rebuild as a stream index (version 2): the linearizable query
	// answers from one version or the other; every member switches.
	v2, err := c.RebuildIndex(ctxT(t), "", "by-sku", &skaldv1.IndexDefinition{Name: "by-sku", Version: 2, Types: []string{"Sold"},
		Kind: skaldv1.IndexKind_INDEX_KIND_STREAM, Fields: []*skaldv1.IndexField{
			{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/sku", Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING},
		}})
	if err != nil || v2.Version != 2 || v2.Kind != skaldv1.IndexKind_INDEX_KIND_STREAM {
		t.Fatalf("rebuild: %v, %v", v2, err)
	}
	page, err = c.QueryIndex(ctxT(t), "", client.IndexQuery{Name: "by-sku", Equal: []string{"sku-1"}, PositionsOnly: true}, client.WithLinearizable())
	if err != nil || len(page.Hits) != 3 {
		t.Fatalf("query during the rebuild: %+v, %v", page, err)
	}
	testutil.Until(t, 20*time.Second, "every member answers from version 2", func() (bool, string) {
		for range 6 { // the round robin visits every member
			info, err := c.IndexInfo(ctxT(t), "", "by-sku")
			if err != nil || info.Definition.Version != 2 || info.Rebuilding != nil {
				return false, fmt.Sprintf("info %v, %v", info, err)
			}
		}
		return true, ""
	})
	if page, err = c.QueryIndex(ctxT(t), "", client.IndexQuery{Name: "by-sku", Equal: []string{"sku-1"}, PositionsOnly: true}); err != nil ||
		len(page.Hits) != 3 || page.Hits[0].Stream == "" {
		t.Fatalf("query of the stream index: %+v, %v", page, err)
	}
	if err := c.DeleteIndex(ctxT(t), "", "by-sku"); err != nil {
		t.Fatal(err)
	}
	_, err = c.IndexInfo(ctxT(t), "", "by-sku", client.WithLinearizable())
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("info after delete: %v, want ErrNotFound", err)
	}
}

func ptr[T any](v T) *T { return &v }
