package rpc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestUnknownProcedureAnswersInProtocol: a call of a method or service the
// server does not have fails UNIMPLEMENTED in the caller's protocol, with
// a message naming it, instead of net/http's plain-text 404.
func TestUnknownProcedureAnswersInProtocol(t *testing.T) {
	t.Parallel()
	s := single(t)
	for _, p := range protocols {
		for _, proc := range []string{"/skald.v1.EventStore/Nope", "/skald.v1.Nope/Nope"} {
			url := "http://" + s.addr + proc
			_, err := connect.NewClient[emptypb.Empty, emptypb.Empty](p.http(), url, p.opts...).CallUnary(ctxT(t), connect.NewRequest(&emptypb.Empty{}))
			if connect.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), proc+" is not a procedure of this server") {
				t.Errorf("%s unary %s: %v, want unimplemented naming it", p.name, proc, err)
			}
			st, err := connect.NewClient[emptypb.Empty, emptypb.Empty](p.http(), url, p.opts...).CallServerStream(ctxT(t), connect.NewRequest(&emptypb.Empty{}))
			if err == nil {
				for st.Receive() {
				}
				err = st.Err()
				st.Close()
			}
			if connect.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "is not a procedure of this server") {
				t.Errorf("%s stream %s: %v, want unimplemented naming it", p.name, proc, err)
			}
		}
	}
	// On the wire, Connect JSON: the error object, not text.
	resp, err := http.Post("http://"+s.addr+"/skald.v1.EventStore/Nope", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Code, Message string }
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Code != "unimplemented" || !strings.Contains(e.Message, "is not a procedure") {
		t.Fatalf("Connect JSON to an unknown method: %d %+v (%v)", resp.StatusCode, e, err)
	}
}
