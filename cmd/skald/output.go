package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/skalddb/skald/client"
	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// The JSON of the admin commands (-o json) is the API's reply message in
// protojson, as scripts have always parsed it: the client's replies are
// turned back into those messages, field for field, to print them.

// printJSON writes one protobuf message as a JSON object.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// timestampOf is t as a protobuf timestamp; nil (JSON null) for the zero
// time, which the client gives for a time the server did not send.
func timestampOf(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func appendReply(r client.AppendResult) *skaldv1.AppendResponse {
	return &skaldv1.AppendResponse{
		FirstPosition: r.FirstPosition, LastPosition: r.LastPosition,
		FirstGlobalPosition: r.FirstGlobalPosition, LastGlobalPosition: r.LastGlobalPosition, Index: r.Index,
		Duplicate: r.Duplicate,
	}
}

func appendMultiReply(r client.AppendMultiResult) *skaldv1.AppendMultiResponse {
	out := &skaldv1.AppendMultiResponse{FirstGlobalPosition: r.FirstGlobalPosition, LastGlobalPosition: r.LastGlobalPosition, Index: r.Index, Duplicate: r.Duplicate}
	for _, s := range r.Streams {
		out.Streams = append(out.Streams, &skaldv1.StreamAppendResult{Stream: s.Stream, FirstPosition: s.FirstPosition, LastPosition: s.LastPosition,
			FirstGlobalPosition: s.FirstGlobalPosition, LastGlobalPosition: s.LastGlobalPosition})
	}
	return out
}

func createReply(ns client.CreatedNamespace) *skaldv1.CreateResponse {
	return &skaldv1.CreateResponse{Name: ns.Name, Token: ns.Token, CreatedAt: timestampOf(ns.CreatedAt), Index: ns.Index}
}

func deleteReply(ns client.DeletedNamespace) *skaldv1.DeleteResponse {
	return &skaldv1.DeleteResponse{Name: ns.Name, DeletedAt: timestampOf(ns.DeletedAt), MessagesDeleted: ns.MessagesDeleted, Index: ns.Index}
}

func namespaceInfo(ns client.Namespace) *skaldv1.NamespaceInfo {
	return &skaldv1.NamespaceInfo{
		Name: ns.Name, Description: ns.Description, CreatedAt: timestampOf(ns.CreatedAt),
		MessageCount: ns.MessageCount, StreamCount: ns.StreamCount, LastActivity: timestampOf(ns.LastActivity),
		DedupeWindow: durationpb.New(ns.DedupeWindow), DedupeForever: ns.DedupeForever,
	}
}

func statusReply(st client.ClusterStatus) *skaldv1.StatusResponse {
	out := &skaldv1.StatusResponse{NodeId: st.NodeID, LeaderId: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex}
	for _, s := range st.Servers {
		srv := &skaldv1.Server{
			Id: s.ID, Name: s.Name, RaftAddress: s.RaftAddress, ApiAddress: s.APIAddress,
			Suffrage: skaldv1.Suffrage_SUFFRAGE_NONVOTER, Healthy: s.Healthy, AppliedIndex: s.AppliedIndex, Unreachable: s.Unreachable,
		}
		if s.Voter {
			srv.Suffrage = skaldv1.Suffrage_SUFFRAGE_VOTER
		}
		if s.LastContact >= 0 {
			srv.LastContact = durationpb.New(s.LastContact)
		}
		out.Servers = append(out.Servers, srv)
	}
	return out
}

// jsonMessage is a message for scripts: data and metadata as JSON, not
// base64.
type jsonMessage struct {
	ID             string          `json:"id"`
	Stream         string          `json:"stream"`
	Type           string          `json:"type"`
	Position       int64           `json:"position"`
	GlobalPosition int64           `json:"globalPosition"`
	Data           json.RawMessage `json:"data"`
	Metadata       json.RawMessage `json:"metadata"`
	Time           string          `json:"time"`
	Tags           []string        `json:"tags,omitempty"`
}

func toJSONMessage(m client.Message) jsonMessage {
	meta := json.RawMessage("null")
	if len(m.Metadata) > 0 {
		meta = m.Metadata
	}
	return jsonMessage{
		ID: m.ID, Stream: m.Stream, Type: m.Type, Position: m.Position, GlobalPosition: m.GlobalPosition,
		Data: m.Data, Metadata: meta, Time: m.Time.UTC().Format(time.RFC3339Nano), Tags: m.Tags,
	}
}

// printMessages writes messages as a table or as {"messages": [...]}.
func printMessages(w io.Writer, output string, msgs []client.Message) error {
	if output == "json" {
		out := struct {
			Messages []jsonMessage `json:"messages"`
		}{Messages: []jsonMessage{}}
		for _, m := range msgs {
			out.Messages = append(out.Messages, toJSONMessage(m))
		}
		return json.NewEncoder(w).Encode(out)
	}
	// A TAGS column only when the page has tags: most namespaces use none.
	tagged := false
	for _, m := range msgs {
		tagged = tagged || len(m.Tags) > 0
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if tagged {
		fmt.Fprintln(tw, "STREAM\tPOS\tGPOS\tTYPE\tTIME\tTAGS\tDATA")
	} else {
		fmt.Fprintln(tw, "STREAM\tPOS\tGPOS\tTYPE\tTIME\tDATA")
	}
	for _, m := range msgs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t", m.Stream, m.Position, m.GlobalPosition, m.Type, m.Time.UTC().Format(time.RFC3339))
		if tagged {
			fmt.Fprintf(tw, "%s\t", strings.Join(m.Tags, ","))
		}
		fmt.Fprintf(tw, "%s\n", m.Data)
	}
	return tw.Flush()
}

func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
