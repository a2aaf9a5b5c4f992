package rpc

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"
)

// unknownProcedures answers calls of procedures this server does not have
// in the caller's own protocol (Connect JSON error, gRPC status 12
// UNIMPLEMENTED in headers or trailers), where net/http and the generated
// handlers would answer a plain-text 404 that RPC clients cannot read.
//
// connect-go handlers do not check the request path, so one unary and one
// streaming handler serve every unknown procedure; the path travels in
// the context for the message.
type unknownProcedures struct {
	unary, stream http.Handler
}

type procedureKey struct{}

func newUnknownProcedures() *unknownProcedures {
	fail := func(ctx context.Context) error {
		proc, _ := ctx.Value(procedureKey{}).(string)
		return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s is not a procedure of this server", proc))
	}
	return &unknownProcedures{
		unary: connect.NewUnaryHandler("/unknown/Unknown", func(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
			return nil, fail(ctx)
		}),
		// A server-stream handler also serves HTTP/1.1 (a bidi one needs
		// HTTP/2) and fails every streaming call before any reply.
		stream: connect.NewServerStreamHandler("/unknown/Unknown", func(ctx context.Context, _ *connect.Request[emptypb.Empty], _ *connect.ServerStream[emptypb.Empty]) error {
			return fail(ctx)
		}),
	}
}

func (u *unknownProcedures) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithValue(r.Context(), procedureKey{}, r.URL.Path))
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect+") {
		u.stream.ServeHTTP(w, r)
		return
	}
	u.unary.ServeHTTP(w, r)
}

// rpcPath is the shape of a procedure path: /package.Service/Method.
var rpcPath = regexp.MustCompile(`^/[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+/[A-Za-z_]\w*$`)

// isRPC reports whether r is a Connect, gRPC or gRPC-Web call (by content
// type, or a Connect JSON POST to a procedure-shaped path), as opposed to
// an EventoDB or plain HTTP request.
func isRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc"), strings.HasPrefix(ct, "application/connect+"),
		strings.HasPrefix(ct, "application/proto"), r.Header.Get("Connect-Protocol-Version") != "":
		return true
	}
	return r.Method == http.MethodPost && strings.HasPrefix(ct, "application/json") && rpcPath.MatchString(r.URL.Path)
}

// withUnknownMethods serves the procedures of service with h and any
// other path under the service with unknown.
func withUnknownMethods(service string, h http.Handler, unknown http.Handler) http.Handler {
	known := map[string]bool{}
	if d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service)); err == nil {
		if sd, ok := d.(protoreflect.ServiceDescriptor); ok {
			for i := range sd.Methods().Len() {
				known["/"+service+"/"+string(sd.Methods().Get(i).Name())] = true
			}
		}
	}
	if len(known) == 0 {
		return h // not in the registry: leave it be
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !known[r.URL.Path] {
			unknown.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
