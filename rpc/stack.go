package rpc

// Go's HTTP/2 server runs every request's handler on a goroutine of its
// own, which starts with a small stack (the runtime's adaptive starting
// size, a few KiB here). A unary call through connect-go, the interceptors
// and the node needs up to 16 KiB (a read up to 32), so the stack grew
// three or four times per call, each time deep inside the call (token
// parsing, a Pebble iterator, the compaction picker a snapshot's close
// runs), where copying it means walking and adjusting every frame: 8-15 %
// of the process's CPU in BenchmarkRPCCallers/h2c (runtime.newstack,
// copystack). HTTP/1.1 does not pay it: one goroutine serves a
// connection's requests one after the other and keeps the stack it grew.
//
// reserveStack grows the calling goroutine's stack once, to 16 KiB, while
// it is still shallow (a dozen frames to adjust instead of forty): enough
// for an append, and the largest size the runtime keeps per-P caches of
// (stacks of 32 KiB and more come from the heap under its lock, which cost
// more than the growth saved when this reserved 32 KiB). A read that goes
// deeper still grows once more. It is called first thing for HTTP/2 unary
// requests (deadlines.ServeHTTP) and by each request's goroutine of an
// AppendStream. The stack goes back to the runtime when the goroutine
// ends, as any stack does, and the garbage collector shrinks a long-lived
// one that uses less than a quarter of it.

// stackReserve is the frame reserveStack takes: with the up to 3 KiB
// below it, the runtime grows the stack to 16 KiB in one step.
const stackReserve = 12 << 10

// reserveStack grows the calling goroutine's stack to 16 KiB, if smaller.
//
//go:noinline
func reserveStack() {
	var pad [stackReserve]byte
	keepStack(&pad)
}

// keepStack keeps pad on reserveStack's frame: a pointer passed to a
// function the compiler does not inline.
//
//go:noinline
func keepStack(*[stackReserve]byte) {}
