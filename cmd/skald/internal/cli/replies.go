package cli

import (
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
)

// The replies below are the API's messages for the results whose -o json
// form the client's types do not give as it always was: append's has no
// message ids, cluster status names the suffrage (SUFFRAGE_VOTER).

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
