package fsm

import (
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
)

// A store killed before any snapshot (no durable floor: Raft replays its
// whole log) keeps its namespace's directory, though _metadata lost the
// record naming it (its writes are not synced, and a kill loses the WAL
// block Pebble had not written yet), and its index resumes from the
// checkpoint its database kept instead of reading every message again.
func TestIndexResumesAfterKill(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openTestStore(t, fs)
	var log []Entry
	apply := func(cmds ...*fsmv1.Command) {
		t.Helper()
		entries := commandEntries(t, uint64(len(log)+1), cmds...)
		for i, r := range s.ApplyBatch(entries) {
			if err, ok := r.(error); ok {
				t.Fatalf("apply %v: %v", cmds[i], err)
			}
		}
		log = append(log, entries...)
	}
	appendMany := func(n int) {
		t.Helper()
		for i := 0; i < n; i += 100 {
			var cmds []*fsmv1.Command
			for j := range 100 {
				cmds = append(cmds, appendCmd("ns", fmt.Sprintf("account-%d", (i+j)%10), accountMsg(i+j, "o")))
			}
			apply(cmds...)
		}
	}
	apply(createNS("ns"), createIndexCmd("ns", balanceIndex()))
	appendMany(2000)
	if r := catchUp(t, s, "ns"); r.Read != 2000 {
		t.Fatalf("the first build read %d messages, want 2000", r.Read)
	}
	appendMany(1000) // the index's checkpoint is in the WAL's written blocks now

	// Like kill -9: what Pebble wrote to its files survives unsynced, what
	// it had not written yet does not.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: randv2.New(randv2.NewPCG(1, 0))})
	var logs testutil.SyncBuffer
	r := openTestStore(t, crashed, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	if strings.Contains(logs.String(), "removing orphaned namespace directory") {
		t.Fatalf("the reopened store removed the namespace's directory:\n%s", logs.String())
	}
	// Raft replays its log from the first entry (no snapshot yet).
	for i := 0; i < len(log); i += 64 {
		r.ApplyBatch(log[i:min(i+64, len(log))])
	}
	info, err := view(t, r, "ns").Index("bal")
	if err != nil {
		t.Fatal(err)
	}
	if info.Checkpoint < 2000 || !info.Built {
		t.Fatalf("after the kill and the replay the index's checkpoint is %d (built %v), want at least 2000: it was lost", info.Checkpoint, info.Built)
	}
	res := catchUp(t, r, "ns")
	if want := 3000 - info.Checkpoint; res.Read != want {
		t.Fatalf("the loop read %d messages after the restart, want %d (those above its checkpoint %d)", res.Read, want, info.Checkpoint)
	}
	if n := len(indexEntries(t, r, "ns", "bal")); n != 3000 {
		t.Fatalf("the index holds %d entries, want 3000", n)
	}
}
