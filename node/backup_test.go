package node

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestBackupRestore backs up a 3-node cluster while writers run, restores
// the backup into a fresh node, and checks it holds exactly the writes up
// to the backup's index.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	var (
		mu    sync.Mutex
		acked []*fsmv1.Result
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := appendOne(context.Background(), c.Nodes[(w+i)%3].Node, "app", fmt.Sprintf("s-%d", w), "")
				if err == nil {
					mu.Lock()
					acked = append(acked, res)
					mu.Unlock()
				}
			}
		}(w)
	}
	testutil.Eventually(t, waitTimeout, "100 writes", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 100 })
	var buf bytes.Buffer
	meta, err := c.Followers()[0].Backup(ctxT(t), &buf, func(int64, fsm.SnapshotMeta) {})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "more writes after the backup", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 200 })
	close(stop)
	wg.Wait()

	var (
		n  *Node
		id string
	)
	for attempt := 0; n == nil; attempt++ { // retry if another test took the port
		dir, raftAddr := t.TempDir(), testutil.FreeAddr(t)
		var rmeta fsm.SnapshotMeta
		id, rmeta, err = RestoreBackup(dir, raftAddr, "", bytes.NewReader(buf.Bytes()))
		if err != nil || rmeta.Index != meta.Index {
			t.Fatalf("restore: %v (index %d, backup %d)", err, rmeta.Index, meta.Index)
		}
		n, err = Open(Config{DataDir: dir, RaftAddr: raftAddr, APIAddr: "127.0.0.1:1", Timing: FastTiming, LeaderWait: 10 * time.Second})
		if err != nil && attempt > 10 {
			t.Fatal(err)
		}
	}
	defer n.Close()
	if n.ID() != id {
		t.Fatalf("restored node id %s, RestoreBackup said %s", n.ID(), id)
	}
	testutil.Eventually(t, waitTimeout, "the restored node to lead itself", n.IsLeader)
	got := readAll(t, n, "app", nodeapi.ReadOptions{})
	want := readAll(t, l.Node, "app", nodeapi.ReadOptions{})
	if len(got) == 0 || len(got) >= len(want) || !reflect.DeepEqual(got, want[:len(got)]) {
		t.Fatalf("restored %d messages; they must be a proper prefix of the cluster's %d", len(got), len(want))
	}
	for _, a := range acked {
		inBackup := a.Index <= meta.Index
		present := a.GetAppend().LastGlobalPosition <= int64(len(got))
		if inBackup != present {
			t.Fatalf("write at index %d (backup at %d): present in the restore = %v", a.Index, meta.Index, present)
		}
	}
	// The restored node takes writes and continues the positions.
	res, err := appendOne(ctxT(t), n, "app", "s-0", "")
	if err != nil || res.GetAppend().FirstGlobalPosition != int64(len(got))+1 {
		t.Fatalf("append after restore: %+v %v", res, err)
	}
}
