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
	psService       = "event_store.client.persistent_subscriptions.PersistentSubscriptions"

	appendProcedure    = "/" + streamsService + "/Append"
	deleteProcedure    = "/" + streamsService + "/Delete"
	tombstoneProcedure = "/" + streamsService + "/Tombstone"
	readProcedure      = "/" + streamsService + "/Read"
	featuresProcedure  = "/" + featuresService + "/GetSupportedMethods"
	gossipProcedure    = "/" + gossipService + "/Read"

	psCreateProcedure       = "/" + psService + "/Create"
	psUpdateProcedure       = "/" + psService + "/Update"
	psDeleteProcedure       = "/" + psService + "/Delete"
	psReadProcedure         = "/" + psService + "/Read"
	psGetInfoProcedure      = "/" + psService + "/GetInfo"
	psReplayParkedProcedure = "/" + psService + "/ReplayParked"
	psListProcedure         = "/" + psService + "/List"
	psRestartProcedure      = "/" + psService + "/RestartSubsystem"
)

// serverVersion is the KurrentDB version advertised. Below 25 the
// clients and their test suites treat the v2 multi-stream append as
// absent rather than failing, which is the truth until it is served.
const serverVersion = "24.10.0"

// psFeatures are the features of every persistent-subscription method:
// groups on a stream and on $all.
var psFeatures = []string{"stream", "all"}

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
	{psService, "Create", psFeatures},
	{psService, "Update", psFeatures},
	{psService, "Delete", psFeatures},
	{psService, "Read", psFeatures},
	{psService, "GetInfo", psFeatures},
	{psService, "ReplayParked", psFeatures},
	{psService, "List", psFeatures},
	{psService, "RestartSubsystem", psFeatures},
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
