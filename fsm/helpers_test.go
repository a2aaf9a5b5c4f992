package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

const testTime = int64(1_700_000_000_000_000_000)

// openTestStore opens a store on fs (a fresh in-memory FS when nil) and
// closes it at the end of the test unless the test closed it.
func openTestStore(t testing.TB, fs vfs.FS, mod ...func(*Options)) *Store {
	t.Helper()
	if fs == nil {
		fs = vfs.NewMem()
	}
	opts := Options{Dir: "/data/fsm", FS: fs}
	for _, m := range mod {
		m(&opts)
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// commandEntries turns commands into consecutive log entries starting at
// index.
func commandEntries(t testing.TB, index uint64, cmds ...*fsmv1.Command) []Entry {
	t.Helper()
	logs := make([]Entry, len(cmds))
	for i, c := range cmds {
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = Entry{Index: index + uint64(i), Term: 1, Data: data}
	}
	return logs
}

// cluster feeds commands to a store with consecutive indexes.
type feeder struct {
	t    testing.TB
	s    *Store
	next uint64
}

func newFeeder(t testing.TB, s *Store) *feeder {
	return &feeder{t: t, s: s, next: s.AppliedIndex() + 1}
}

// apply applies cmds as one ApplyBatch and returns the results.
func (f *feeder) apply(cmds ...*fsmv1.Command) []any {
	f.t.Helper()
	logs := commandEntries(f.t, f.next, cmds...)
	f.next += uint64(len(cmds))
	return f.s.ApplyBatch(logs)
}

// must applies one command and fails the test on a business error.
func (f *feeder) must(cmd *fsmv1.Command) any {
	f.t.Helper()
	r := f.apply(cmd)[0]
	if err, ok := r.(error); ok {
		f.t.Fatalf("apply %v: %v", cmd, err)
	}
	return r
}

func createNS(name string) *fsmv1.Command {
	h := sha256.Sum256([]byte("token-" + name))
	return &fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{CreateNamespace: &fsmv1.CreateNamespace{
		Name: name, Description: "ns " + name, TokenHash: h[:], CreatedUnixNano: testTime,
	}}}
}

func deleteNS(name string) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_DeleteNamespace{DeleteNamespace: &fsmv1.DeleteNamespace{Name: name, DeletedUnixNano: testTime}}}
}

var idSeq int

func newMsg(typ, data string) *fsmv1.NewMessage {
	idSeq++
	return &fsmv1.NewMessage{Id: fmt.Sprintf("00000000-0000-4000-8000-%012d", idSeq), Type: typ, Data: []byte(data)}
}

func withMeta(m *fsmv1.NewMessage, meta string) *fsmv1.NewMessage {
	m.Metadata = []byte(meta)
	return m
}

func appendCmd(ns, stream string, msgs ...*fsmv1.NewMessage) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{
		Namespace: ns, Stream: stream, Messages: msgs, TimeUnixNano: testTime,
	}}}
}

func appendExpect(ns, stream string, expected int64, msgs ...*fsmv1.NewMessage) *fsmv1.Command {
	c := appendCmd(ns, stream, msgs...)
	c.GetAppend().ExpectedVersion = &expected
	return c
}

func truncateCmd(ns, stream string, before int64) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_TruncateStream{TruncateStream: &fsmv1.TruncateStream{Namespace: ns, Stream: stream, Before: before}}}
}

func deleteStreamCmd(ns, stream string, hard bool) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_DeleteStream{DeleteStream: &fsmv1.DeleteStream{Namespace: ns, Stream: stream, Hard: hard}}}
}

func nodeInfo(id, addr string) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_SetNodeInfo{SetNodeInfo: &fsmv1.SetNodeInfo{NodeId: id, ApiAddress: addr}}}
}

// view opens a view and closes it with the test.
func view(t testing.TB, s *Store, ns string) *View {
	t.Helper()
	v, err := s.View(ns)
	if err != nil {
		t.Fatalf("view %q: %v", ns, err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// contentHash hashes every key and value of _metadata (but the durable
// floor, which depends on when it was recorded) and of every namespace
// database (but node-local index state, NodeLocalKey), in order. Two stores with equal hashes hold the same state.
func contentHash(t testing.TB, s *Store) string {
	t.Helper()
	h := sha256.New()
	dump := func(label string, db interface {
		NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
	}) {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		fmt.Fprintf(h, "[%s]", label)
		for it.First(); it.Valid(); it.Next() {
			if label == "_metadata" && string(it.Key()) == string(keyFloor) {
				continue
			}
			if label != "_metadata" && NodeLocalKey(it.Key()) {
				continue
			}
			fmt.Fprintf(h, "%x=%x;", it.Key(), it.Value())
		}
	}
	dump("_metadata", s.metaDB())
	infos := s.Namespaces()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	for _, info := range infos {
		ns, err := s.acquire(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		dump(fmt.Sprintf("%s/%d", info.Name, info.ID), ns.db)
		s.release(ns)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// streamOf reads a whole stream.
func streamOf(t testing.TB, s *Store, ns, stream string) []Message {
	t.Helper()
	msgs, err := view(t, s, ns).ReadStream(StreamQuery{Stream: stream, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func positions(msgs []Message) (pos, gps []int64) {
	for _, m := range msgs {
		pos = append(pos, m.Position)
		gps = append(gps, m.GlobalPosition)
	}
	return pos, gps
}

// member is the member of r's Result oneof when r, what apply answered
// for an entry, is a Result holding an M; the zero M (nil) otherwise.
func member[M proto.Message](r any) M {
	m, _ := memberOK[M](r)
	return m
}

// memberOK is member with whether r held an M.
func memberOK[M proto.Message](r any) (M, bool) {
	var zero M
	res, ok := r.(*fsmv1.Result)
	if !ok {
		return zero, false
	}
	fd := res.ProtoReflect().WhichOneof(resultOneof)
	if fd == nil || fd.Message() == nil {
		return zero, false
	}
	m, ok := res.ProtoReflect().Get(fd).Message().Interface().(M)
	return m, ok
}

// answerAt is want, a member of the Result oneof (*fsmv1.AppendResult,
// ...) in the field named result, as apply answers it for the entry at
// index; anything else (an error) as it is.
func answerAt(index uint64, result protoreflect.Name, want any) any {
	for _, k := range kinds {
		if k.Result.Name == result {
			return k.answer(index, want)
		}
	}
	panic("no kind is answered by Result." + string(result))
}

// resultOneof is the oneof of fsmv1.Result that answers a kind.
var resultOneof = (&fsmv1.Result{}).ProtoReflect().Descriptor().Oneofs().ByName("result")

// sameAnswer compares what apply answered with what a test wants:
// proto.Equal for a Result, reflect.DeepEqual for anything else.
func sameAnswer(got, want any) bool {
	g, ok1 := got.(*fsmv1.Result)
	w, ok2 := want.(*fsmv1.Result)
	if ok1 && ok2 {
		return proto.Equal(g, w)
	}
	return reflect.DeepEqual(got, want)
}

// sameAnswers is sameAnswer for every entry of two ApplyBatch answers.
func sameAnswers(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !sameAnswer(got[i], want[i]) {
			return false
		}
	}
	return true
}

// answerKind names what apply answered: the field of the Result oneof
// ("append"), or the Go type of anything else ("*fsm.ValidationError").
func answerKind(r any) string {
	if res, ok := r.(*fsmv1.Result); ok {
		if fd := res.ProtoReflect().WhichOneof(resultOneof); fd != nil {
			return string(fd.Name())
		}
	}
	return fmt.Sprintf("%T", r)
}
