package client

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Namespace describes a namespace (a tenant).
type Namespace struct {
	Name         string
	Description  string
	CreatedAt    time.Time
	MessageCount int64
	StreamCount  int64
	// LastActivity is the time of the last write; zero before the first.
	LastActivity time.Time
	// DedupeWindow is how long the namespace remembers the message ids
	// clients give (idempotent writes); 0 when it does not (off), or when
	// DedupeForever.
	DedupeWindow  time.Duration
	DedupeForever bool
}

// NamespaceOption sets a namespace's settings at CreateNamespace.
type NamespaceOption func(*skaldv1.CreateRequest)

// WithDedupeWindow makes the namespace remember client-given message ids
// for d (1 s or more); 0 turns idempotent writes off. Without it the
// server's default applies (2 minutes).
func WithDedupeWindow(d time.Duration) NamespaceOption {
	return func(r *skaldv1.CreateRequest) { r.DedupeWindow, r.DedupeForever = durationpb.New(d), false }
}

// WithDedupeForever makes the namespace remember every client-given id.
func WithDedupeForever() NamespaceOption {
	return func(r *skaldv1.CreateRequest) { r.DedupeWindow, r.DedupeForever = nil, true }
}

// CreatedNamespace is the reply of CreateNamespace.
type CreatedNamespace struct {
	Name string
	// Token is the namespace's token; the server keeps only its hash, so
	// this is the only time anyone sees it.
	Token     string
	CreatedAt time.Time
	// Index is the creation's Raft index.
	Index uint64
}

// DeletedNamespace is the reply of DeleteNamespace.
type DeletedNamespace struct {
	Name            string
	DeletedAt       time.Time
	MessagesDeleted int64
	// Index is the deletion's Raft index.
	Index uint64
}

// CreateNamespace creates a namespace (admin token). token may be empty
// (the server makes one) or a token of name. ErrAlreadyExists when taken.
// Like Append, it is not retried once its outcome is unknown.
func (c *Client) CreateNamespace(ctx context.Context, name, description, token string, opts ...NamespaceOption) (CreatedNamespace, error) {
	req := &skaldv1.CreateRequest{Name: name, Description: description, Token: token}
	for _, o := range opts {
		o(req)
	}
	resp, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.CreateResponse], error) {
		return m.namespaces.Create(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return CreatedNamespace{}, err
	}
	return CreatedNamespace{Name: resp.Name, Token: resp.Token, CreatedAt: asTime(resp.CreatedAt), Index: resp.Index}, nil
}

// DeleteNamespace deletes a namespace and its messages (admin token); the
// reply says how many messages it held. ErrNotFound when there is none.
func (c *Client) DeleteNamespace(ctx context.Context, name string) (DeletedNamespace, error) {
	resp, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.DeleteResponse], error) {
		return m.namespaces.Delete(ctx, connect.NewRequest(&skaldv1.DeleteRequest{Name: name}))
	})
	if err != nil {
		return DeletedNamespace{}, err
	}
	return DeletedNamespace{Name: resp.Name, DeletedAt: asTime(resp.DeletedAt), MessagesDeleted: resp.MessagesDeleted, Index: resp.Index}, nil
}

// ListNamespaces returns every namespace, "default" included (admin
// token), in byte order of the name, reading the server's pages (1000
// namespaces each) on from their next_cursor.
func (c *Client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var out []Namespace
	for cursor := ""; ; {
		var next string
		err := c.read(ctx, func(ctx context.Context, m *member) error {
			r, err := m.namespaces.List(ctx, connect.NewRequest(&skaldv1.ListRequest{Cursor: cursor}))
			if err != nil {
				return err
			}
			for _, ns := range r.Msg.Namespaces {
				out = append(out, namespaceFromWire(ns))
			}
			next = r.Msg.NextCursor
			return nil
		})
		if err != nil || next == "" {
			return out, err
		}
		cursor = next
	}
}

// GetNamespace describes one namespace: any with the admin token, the
// token's own with a namespace token.
func (c *Client) GetNamespace(ctx context.Context, name string) (Namespace, error) {
	var out Namespace
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.namespaces.Get(ctx, connect.NewRequest(&skaldv1.GetRequest{Name: name}))
		if err == nil {
			out = namespaceFromWire(r.Msg)
		}
		return err
	})
	return out, err
}

func namespaceFromWire(ns *skaldv1.NamespaceInfo) Namespace {
	if ns == nil {
		return Namespace{}
	}
	return Namespace{
		Name: ns.Name, Description: ns.Description, CreatedAt: asTime(ns.CreatedAt),
		MessageCount: ns.MessageCount, StreamCount: ns.StreamCount, LastActivity: asTime(ns.LastActivity),
		DedupeWindow: ns.DedupeWindow.AsDuration(), DedupeForever: ns.DedupeForever,
	}
}

// asTime is ts in UTC, the zero time when ts is absent.
func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
