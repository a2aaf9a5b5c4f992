package client

import (
	"context"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// Namespace describes a namespace (a tenant).
type Namespace struct {
	Name         string
	Description  string
	CreatedAt    time.Time
	MessageCount int64
	StreamCount  int64
	LastActivity time.Time
}

// CreatedNamespace is the reply of CreateNamespace.
type CreatedNamespace struct {
	Name string
	// Token is the namespace's token; the server keeps only its hash, so
	// this is the only time anyone sees it.
	Token     string
	CreatedAt time.Time
}

// CreateNamespace creates a namespace (admin token). token may be empty
// (the server makes one) or a token of name. ErrAlreadyExists when taken.
// Like Append, it is not retried once its outcome is unknown.
func (c *Client) CreateNamespace(ctx context.Context, name, description, token string) (CreatedNamespace, error) {
	var resp *skaldv1.CreateResponse
	err := c.write(ctx, nil, func(ctx context.Context, m *member) error {
		r, err := m.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: name, Description: description, Token: token}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return CreatedNamespace{}, err
	}
	c.observe(resp.Index)
	return CreatedNamespace{Name: resp.Name, Token: resp.Token, CreatedAt: resp.CreatedAt.AsTime()}, nil
}

// DeleteNamespace deletes a namespace and its messages (admin token) and
// returns how many messages it held. ErrNotFound when there is none.
func (c *Client) DeleteNamespace(ctx context.Context, name string) (messagesDeleted int64, err error) {
	var resp *skaldv1.DeleteResponse
	err = c.write(ctx, nil, func(ctx context.Context, m *member) error {
		r, err := m.namespaces.Delete(ctx, connect.NewRequest(&skaldv1.DeleteRequest{Name: name}))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	c.observe(resp.Index)
	return resp.MessagesDeleted, nil
}

// ListNamespaces returns every namespace, "default" included (admin token).
func (c *Client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var out []Namespace
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.namespaces.List(ctx, connect.NewRequest(&skaldv1.ListRequest{}))
		if err != nil {
			return err
		}
		out = make([]Namespace, len(r.Msg.Namespaces))
		for i, ns := range r.Msg.Namespaces {
			out[i] = namespaceFromWire(ns)
		}
		return nil
	})
	return out, err
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
	out := Namespace{Name: ns.Name, Description: ns.Description, CreatedAt: ns.CreatedAt.AsTime(), MessageCount: ns.MessageCount, StreamCount: ns.StreamCount}
	if ns.LastActivity != nil {
		out.LastActivity = ns.LastActivity.AsTime()
	}
	return out
}
