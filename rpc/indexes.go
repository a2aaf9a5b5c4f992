package rpc

import (
	"context"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// indexBackend is what the Indexes service needs from the node.
type indexBackend interface {
	CreateIndex(ctx context.Context, c *fsmv1.CreateIndex) (*fsmv1.Result, error)
	DeleteIndex(ctx context.Context, c *fsmv1.DeleteIndex) (*fsmv1.Result, error)
	RebuildIndex(ctx context.Context, c *fsmv1.RebuildIndex) (*fsmv1.Result, error)
	SetIndexState(ctx context.Context, c *fsmv1.SetIndexState) (*fsmv1.Result, error)
	ReadIndexed(ctx context.Context, ns, index string, opts nodeapi.ReadOptions, fn func(*fsm.View) error) (uint64, error)
	Read(ctx context.Context, ns string, opts nodeapi.ReadOptions, fn func(*fsm.View) error) (uint64, error)
	AppliedIndex() uint64
}

// indexes implements skald.v1.Indexes. Authorization is retention's: a
// namespace token reaches its own namespace's indexes, the admin token
// any namespace's but the admin namespace's.
type indexes struct {
	b         indexBackend
	log       *slog.Logger
	pageBytes int
	// scanBudget bounds the entries one Query reads and does not return
	// (Limits.ScanBudget, as every Connect read).
	scanBudget int
}

// indexNamespace resolves the namespace an index call names
// (settingsNamespace).
func indexNamespace(ctx context.Context, name string) (string, error) {
	return settingsNamespace(ctx, name, "use the indexes of", "has no indexes")
}

// indexCall is how every Indexes call begins: the request has no field
// this server does not know (checkKnown), and the caller may use the
// indexes of namespace ns (indexNamespace), whose name it returns.
func indexCall(ctx context.Context, req proto.Message, ns string) (string, error) {
	if err := checkKnown(req); err != nil {
		return "", err
	}
	return indexNamespace(ctx, ns)
}

// namedIndexCall is indexCall for a call naming an index: index must be a
// valid index name.
func namedIndexCall(ctx context.Context, req proto.Message, ns, index string) (string, error) {
	name, err := indexCall(ctx, req, ns)
	if err != nil {
		return "", err
	}
	if err := asInvalid(fsm.ValidateGroupName("name", index)); err != nil {
		return "", err
	}
	return name, nil
}

// indexDefinitionIn converts a definition of the API; fsm validates it.
func indexDefinitionIn(d *skaldv1.IndexDefinition) (*fsmv1.IndexDefinition, error) {
	if d == nil {
		return nil, invalidField("definition", "is required")
	}
	out := &fsmv1.IndexDefinition{Name: d.Name, Version: d.Version, Category: d.Category, Types: d.Types, Kind: fsmv1.IndexKind(d.Kind),
		Storage: fsmv1.IndexStorage(d.Storage)}
	if d.Query != nil {
		q, err := queryOf("definition.query", d.Query)
		if err != nil {
			return nil, err
		}
		out.Query = q
	}
	for _, f := range d.Fields {
		if f == nil {
			f = &skaldv1.IndexField{}
		}
		out.Fields = append(out.Fields, &fsmv1.IndexField{Source: fsmv1.IndexFieldSource(f.Source), Pointer: f.Pointer, Type: fsmv1.IndexFieldType(f.Type)})
	}
	if err := fsm.ValidateIndexDefinition(out); err != nil {
		return nil, asInvalid(prefixed("definition.", err))
	}
	return out, nil
}

// prefixed puts prefix before a ValidationError's field.
func prefixed(prefix string, err error) error {
	if ve, ok := err.(*fsm.ValidationError); ok {
		return &fsm.ValidationError{Field: prefix + ve.Field, Reason: ve.Reason}
	}
	return err
}

func indexDefinitionOut(d *fsmv1.IndexDefinition) *skaldv1.IndexDefinition {
	out := &skaldv1.IndexDefinition{Name: d.Name, Version: d.Version, Category: d.Category, Types: d.Types, Kind: skaldv1.IndexKind(d.Kind),
		Created: timestamppb.New(time.Unix(0, d.CreatedUnixNano)), Storage: skaldv1.IndexStorage(d.Storage)}
	if d.Query != nil {
		out.Query = &skaldv1.Query{}
		for _, it := range d.Query.Items {
			out.Query.Items = append(out.Query.Items, &skaldv1.QueryItem{Types: it.Types, Tags: it.Tags})
		}
	}
	for _, f := range d.Fields {
		out.Fields = append(out.Fields, &skaldv1.IndexField{Source: skaldv1.IndexFieldSource(f.Source), Pointer: f.Pointer, Type: skaldv1.IndexFieldType(f.Type)})
	}
	return out
}

func indexStatusOut(info fsm.IndexInfo, applied uint64) *skaldv1.IndexStatus {
	out := &skaldv1.IndexStatus{Checkpoint: info.Checkpoint, Entries: info.Entries, Skipped: info.Skipped,
		LagEvents: info.LagEvents, CoveredIndex: info.Covered, AppliedIndex: applied,
		State: skaldv1.IndexState_INDEX_STATE_HEALTHY, Progress: info.Progress, Lag: durationpb.New(info.LagTime)}
	if !info.Built {
		out.State = skaldv1.IndexState_INDEX_STATE_BUILDING
		if info.ETA > 0 && !info.Paused && info.Failure == "" {
			out.Eta = durationpb.New(info.ETA)
		}
	}
	// Failed outranks paused: a resume would not bring it back, a
	// rebuild does.
	out.Paused, out.Failure, out.MemoryBytes = info.Paused, info.Failure, info.MemoryBytes
	switch {
	case info.Failure != "":
		out.State = skaldv1.IndexState_INDEX_STATE_FAILED
	case info.Paused:
		out.State = skaldv1.IndexState_INDEX_STATE_PAUSED
	}
	return out
}

func (s *indexes) Create(ctx context.Context, req *connect.Request[skaldv1.IndexesCreateRequest]) (*connect.Response[skaldv1.IndexesCreateResponse], error) {
	name, err := indexCall(ctx, req.Msg, req.Msg.Namespace)
	if err != nil {
		return nil, err
	}
	d, err := indexDefinitionIn(req.Msg.Definition)
	if err != nil {
		return nil, err
	}
	res, err := s.b.CreateIndex(ctx, &fsmv1.CreateIndex{Namespace: name, Definition: d})
	if err != nil {
		return nil, toConnect(ctx, s.log, namedNamespace(name, prefixed("definition.", err)))
	}
	return connect.NewResponse(&skaldv1.IndexesCreateResponse{Definition: indexDefinitionOut(res.GetIndexResult().Definition), Index: res.Index}), nil
}

func (s *indexes) Rebuild(ctx context.Context, req *connect.Request[skaldv1.IndexesRebuildRequest]) (*connect.Response[skaldv1.IndexesRebuildResponse], error) {
	name, err := namedIndexCall(ctx, req.Msg, req.Msg.Namespace, req.Msg.Name)
	if err != nil {
		return nil, err
	}
	c := &fsmv1.RebuildIndex{Namespace: name, Name: req.Msg.Name}
	if req.Msg.Definition != nil {
		if c.Definition, err = indexDefinitionIn(req.Msg.Definition); err != nil {
			return nil, err
		}
		if c.Definition.Name != req.Msg.Name {
			return nil, invalidField("definition.name", "must be the index's name %q, got %q (a rebuild keeps the name)", req.Msg.Name, c.Definition.Name)
		}
	}
	res, err := s.b.RebuildIndex(ctx, c)
	if err != nil {
		return nil, toConnect(ctx, s.log, namedNamespace(name, prefixed("definition.", err)))
	}
	return connect.NewResponse(&skaldv1.IndexesRebuildResponse{Definition: indexDefinitionOut(res.GetIndexResult().Definition), Index: res.Index}), nil
}

func (s *indexes) Pause(ctx context.Context, req *connect.Request[skaldv1.IndexesPauseRequest]) (*connect.Response[skaldv1.IndexesPauseResponse], error) {
	index, err := s.setState(ctx, req.Msg, req.Msg.Namespace, req.Msg.Name, true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.IndexesPauseResponse{Index: index}), nil
}

func (s *indexes) Resume(ctx context.Context, req *connect.Request[skaldv1.IndexesResumeRequest]) (*connect.Response[skaldv1.IndexesResumeResponse], error) {
	index, err := s.setState(ctx, req.Msg, req.Msg.Namespace, req.Msg.Name, false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.IndexesResumeResponse{Index: index}), nil
}

// setState is Pause and Resume: one command (fsm.SetIndexState), two
// procedures, so a caller says what it wants in the method's name.
func (s *indexes) setState(ctx context.Context, req proto.Message, namespace, index string, paused bool) (uint64, error) {
	name, err := namedIndexCall(ctx, req, namespace, index)
	if err != nil {
		return 0, err
	}
	res, err := s.b.SetIndexState(ctx, &fsmv1.SetIndexState{Namespace: name, Name: index, Paused: paused})
	if err != nil {
		return 0, toConnect(ctx, s.log, namedNamespace(name, err))
	}
	return res.Index, nil
}

func (s *indexes) Delete(ctx context.Context, req *connect.Request[skaldv1.IndexesDeleteRequest]) (*connect.Response[skaldv1.IndexesDeleteResponse], error) {
	name, err := namedIndexCall(ctx, req.Msg, req.Msg.Namespace, req.Msg.Name)
	if err != nil {
		return nil, err
	}
	res, err := s.b.DeleteIndex(ctx, &fsmv1.DeleteIndex{Namespace: name, Name: req.Msg.Name})
	if err != nil {
		return nil, toConnect(ctx, s.log, namedNamespace(name, err))
	}
	return connect.NewResponse(&skaldv1.IndexesDeleteResponse{Index: res.Index}), nil
}

// read runs fn at the requested consistency, pages capped at
// s.pageBytes. With waitIndex (a query's index name), LINEARIZABLE and
// SESSION also wait for that index (ReadIndexed); List and Info do not:
// they report the progress of an index that may be building.
func (s *indexes) read(ctx context.Context, ns string, o *skaldv1.ReadOptions, waitIndex string, fn func(*fsm.View) error) (uint64, error) {
	opts, err := readOptions(o)
	if err != nil {
		return 0, err
	}
	hold := holdFrom(ctx)
	withPage := func(v *fsm.View) error {
		// Once the read may start (past its barrier), not while it waits.
		if err := hold.reserve(ctx, s.pageBytes+replyOverhead); err != nil {
			return err
		}
		v.SetPageBytes(s.pageBytes)
		err := fn(v)
		hold.keep(v.LastPageBytes() + replyOverhead)
		return err
	}
	var applied uint64
	if waitIndex != "" {
		applied, err = s.b.ReadIndexed(ctx, ns, waitIndex, opts, withPage)
	} else {
		applied, err = s.b.Read(ctx, ns, opts, withPage)
	}
	if err != nil {
		return 0, toConnect(ctx, s.log, namedNamespace(ns, err))
	}
	return applied, nil
}

func (s *indexes) List(ctx context.Context, req *connect.Request[skaldv1.IndexesListRequest]) (*connect.Response[skaldv1.IndexesListResponse], error) {
	name, err := indexCall(ctx, req.Msg, req.Msg.Namespace)
	if err != nil {
		return nil, err
	}
	var infos []fsm.IndexInfo
	// A listing never waits for the loops: it reports their progress.
	applied, err := s.read(ctx, name, req.Msg.Read, "", func(v *fsm.View) (err error) {
		infos, err = v.Indexes()
		return err
	})
	if err != nil {
		return nil, err
	}
	resp := &skaldv1.IndexesListResponse{AppliedIndex: applied}
	for _, info := range infos {
		resp.Indexes = append(resp.Indexes, indexInfoOut(info, applied))
	}
	return connect.NewResponse(resp), nil
}

func (s *indexes) Info(ctx context.Context, req *connect.Request[skaldv1.IndexesInfoRequest]) (*connect.Response[skaldv1.IndexesInfoResponse], error) {
	name, err := namedIndexCall(ctx, req.Msg, req.Msg.Namespace, req.Msg.Name)
	if err != nil {
		return nil, err
	}
	var info fsm.IndexInfo
	applied, err := s.read(ctx, name, req.Msg.Read, "", func(v *fsm.View) (err error) {
		if err := indexReadable(ctx, v, skaldv1connect.IndexesInfoProcedure, req.Msg.Name); err != nil {
			return err
		}
		info, err = v.Index(req.Msg.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.IndexesInfoResponse{AppliedIndex: applied, Index: indexInfoOut(info, applied)}), nil
}

// indexInfoOut is an index's info: the definition queries answer from,
// and a rebuild while it builds.
func indexInfoOut(info fsm.IndexInfo, applied uint64) *skaldv1.IndexInfo {
	out := &skaldv1.IndexInfo{Definition: indexDefinitionOut(info.Definition), Status: indexStatusOut(info, applied)}
	if r := info.Rebuilding; r != nil {
		out.Rebuilding, out.RebuildStatus = indexDefinitionOut(r.Definition), indexStatusOut(*r, applied)
	}
	return out
}

func (s *indexes) Query(ctx context.Context, req *connect.Request[skaldv1.IndexesQueryRequest]) (*connect.Response[skaldv1.IndexesQueryResponse], error) {
	m := req.Msg
	name, err := namedIndexCall(ctx, m, m.Namespace, m.Name)
	if err != nil {
		return nil, err
	}
	if m.Limit < 0 || m.Limit > fsm.MaxIndexLimit {
		return nil, invalidField("limit", "must be 0 (default %d) or 1..%d, got %d", fsm.DefaultIndexLimit, fsm.MaxIndexLimit, m.Limit)
	}
	q := fsm.IndexQuery{Index: m.Name, Equal: m.Equal, Prefix: m.Prefix, Backward: m.Descending, Limit: int(m.Limit),
		Cursor: m.Cursor, PositionsOnly: m.PositionsOnly}
	if m.From != nil {
		q.From = &fsm.IndexBound{Value: m.From.Value, Exclusive: m.From.Exclusive}
	}
	if m.To != nil {
		q.To = &fsm.IndexBound{Value: m.To.Value, Exclusive: m.To.Exclusive}
	}
	var (
		page fsm.IndexPage
		info fsm.IndexInfo
	)
	applied, err := s.read(ctx, name, m.Read, m.Name, func(v *fsm.View) (err error) {
		// A query past the budget replies with its hits so far,
		// truncated, and next_cursor to go on from.
		v.SetScanBudget(s.scanBudget)
		if err := indexReadable(ctx, v, skaldv1connect.IndexesQueryProcedure, m.Name); err != nil {
			return err
		}
		if page, err = v.QueryIndex(q); err != nil {
			return err
		}
		info, err = v.Index(m.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	resp := &skaldv1.IndexesQueryResponse{NextCursor: page.NextCursor, Truncated: page.Capped, AppliedIndex: applied, Status: indexStatusOut(info, applied)}
	for _, h := range page.Hits {
		hit := &skaldv1.IndexHit{GlobalPosition: h.GlobalPosition, Stream: h.Stream}
		for _, v := range h.Values {
			hit.Values = append(hit.Values, indexValueText(v, h, info.Definition, len(hit.Values)))
		}
		if h.Message != nil {
			hit.Message = message(h.Message)
		}
		resp.Hits = append(resp.Hits, hit)
	}
	return connect.NewResponse(resp), nil
}

// indexValueText is a hit's value as text; times in RFC 3339.
func indexValueText(v any, _ fsm.IndexHit, d *fsmv1.IndexDefinition, i int) string {
	if i < len(d.Fields) && d.Fields[i].Type == fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME {
		if ns, ok := v.(int64); ok {
			return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
		}
	}
	return fsm.FormatIndexValue(v)
}
