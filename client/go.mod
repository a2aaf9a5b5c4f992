module github.com/skalddb/skald/client

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	github.com/google/uuid v1.6.0
	github.com/skalddb/skald/api v0.0.0-00010101000000-000000000000
	go.opentelemetry.io/otel/trace v1.47.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261104224025-d1e00e9f33ab
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
)

// Development: the api module beside this one. Consumers ignore a
// dependency's replace, so a released client requires a tagged api
// (tag api/vX.Y.Z, bump this require, then tag client/vX.Y.Z).
replace github.com/skalddb/skald/api => ../api
