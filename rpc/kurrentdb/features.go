package kurrentdb

import (
	"context"
	"strings"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/serverfeatures"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
)

// The served procedures.
const (
	streamsService  = "event_store.client.streams.Streams"
	featuresService = "event_store.client.server_features.ServerFeatures"
	gossipService   = "event_store.client.gossip.Gossip"

	appendProcedure    = "/" + streamsService + "/Append"
	deleteProcedure    = "/" + streamsService + "/Delete"
	tombstoneProcedure = "/" + streamsService + "/Tombstone"
	readProcedure      = "/" + streamsService + "/Read"
	featuresProcedure  = "/" + featuresService + "/GetSupportedMethods"
	gossipProcedure    = "/" + gossipService + "/Read"
)

// serverVersion is the KurrentDB version advertised. Below 25 the
// clients and their test suites treat the v2 multi-stream append as
// absent rather than failing, which is the truth until it is served.
const serverVersion = "24.10.0"

// supported lists exactly the served methods, with the features
// KurrentDB advertises for them that Skald implements. The clients check
// a method (and a feature) here before they use it.
var supported = []struct {
	service, method string
	features        []string
}{
	{streamsService, "Read", []string{"position", "events"}},
	{streamsService, "Append", nil},
	{streamsService, "Delete", nil},
	{streamsService, "Tombstone", nil},
	{featuresService, "GetSupportedMethods", nil},
	{gossipService, "Read", nil},
}

// features answers ServerFeatures.GetSupportedMethods, anonymously (the
// clients call it without credentials): names in lower case, as
// KurrentDB sends them.
func (s *Server) features(context.Context, *connect.Request[shared.Empty]) (
	*connect.Response[serverfeatures.SupportedMethods], error) {
	out := &serverfeatures.SupportedMethods{EventStoreServerVersion: serverVersion}
	for _, m := range supported {
		out.Methods = append(out.Methods, &serverfeatures.SupportedMethod{
			ServiceName: strings.ToLower(m.service), MethodName: strings.ToLower(m.method), Features: m.features,
		})
	}
	return connect.NewResponse(out), nil
}
