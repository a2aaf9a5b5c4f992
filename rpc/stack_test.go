package rpc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unsafe"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
)

// stackPos is where a local variable of this function lies: it moves
// when the calling goroutine's stack is copied to a larger one.
//
//go:noinline
func stackPos() uintptr {
	var b byte
	return uintptr(unsafe.Pointer(&b))
}

// useStack recurses depth frames of about 300 bytes each.
//
//go:noinline
func useStack(depth int) byte {
	var pad [256]byte
	pad[depth%256] = byte(depth)
	if depth <= 0 {
		return pad[0]
	}
	return useStack(depth-1) + pad[(depth*7)%256]
}

// TestReserveStack: after reserveStack, a fresh goroutine (as Go's HTTP/2
// server gives every request) uses 9 KiB of stack without the stack being
// copied again. The control, without it, must see a copy (the runtime
// starts goroutines with a few KiB); if the process's adaptive starting
// size has grown past that, the test cannot tell and is skipped.
func TestReserveStack(t *testing.T) {
	t.Parallel()
	moves := func(reserve bool) bool {
		got := make(chan bool, 1)
		go func() {
			if reserve {
				reserveStack()
			}
			before := stackPos()
			useStack(30)
			got <- stackPos() != before
		}()
		return <-got
	}
	if !moves(false) {
		t.Skip("new goroutines already start with a stack that holds 9 KiB")
	}
	if moves(true) {
		t.Fatal("stack copied while using 9 KiB after reserveStack")
	}
}

// TestDeadlinesReserveStack: deadlines reserves the stack for an HTTP/2
// unary request, on the goroutine the server gave it, before the handler
// runs.
func TestDeadlinesReserveStack(t *testing.T) {
	t.Parallel()
	moved := make(chan bool, 1)
	h := deadlines{limits: Limits{}.withDefaults(), next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		before := stackPos()
		useStack(30)
		moved <- stackPos() != before
	})}
	r := httptest.NewRequest(http.MethodPost, skaldv1connect.EventStoreAppendProcedure, strings.NewReader("x"))
	r.ProtoMajor, r.ProtoMinor, r.Proto = 2, 0, "HTTP/2.0"
	go h.ServeHTTP(httptest.NewRecorder(), r)
	if <-moved {
		t.Fatal("the handler's stack was copied while using 9 KiB: deadlines did not reserve it")
	}
}
