package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// The workloads: one op per concurrent caller, and the streams reads need.

func (c *benchConfig) payloadJSON(r *rand.Rand) []byte {
	b := make([]byte, 0, c.payload)
	b = append(b, `{"p":"`...)
	for len(b) < c.payload-2 {
		b = append(b, byte('a'+r.IntN(26)))
	}
	return append(b, `"}`...)
}

func (c *benchConfig) stream(n int) string { return fmt.Sprintf("%s-%d", c.run, n%c.streams) }

// fill writes 100 messages to each stream so reads have something to read.
func (c *benchConfig) fill(ctx context.Context, cl *client.Client, stderr io.Writer) error {
	r := rand.New(rand.NewPCG(1, 2))
	prog := newProgress(stderr)
	defer prog.done()
	for s := 0; s < c.streams; s++ {
		msgs := make([]client.NewMessage, 100)
		for i := range msgs {
			msgs[i] = client.NewMessage{Type: "Filled", Data: c.payloadJSON(r)}
		}
		if _, err := cl.Append(ctx, c.stream(s), msgs); err != nil {
			return command.APIError(err)
		}
		if s%100 == 99 {
			prog.printf("filling streams: %d/%d", s+1, c.streams)
		}
	}
	return nil
}

// op is one measured call; it returns how many messages it moved.
type op func(ctx context.Context, r *rand.Rand) (int, error)

func (c *benchConfig) execute(ctx context.Context, cf *command.Flags, stderr io.Writer) (*Result, error) {
	clients, err := c.dial(ctx, cf)
	if err != nil {
		return nil, err
	}
	defer clients.close()
	if c.workload == "subscribe" {
		return c.subscribe(ctx, clients, stderr)
	}
	if c.workload == "consume" {
		return c.consume(ctx, clients, stderr)
	}
	if c.workload == "read-stream" || c.workload == "read-category" || c.workload == "mixed" {
		if err := c.fill(ctx, clients.of(0), stderr); err != nil {
			return nil, err
		}
	}
	ops := make([]op, c.concurrency)
	for w := range ops {
		cl := clients.of(w)
		appendN := func(n int) op {
			return func(ctx context.Context, r *rand.Rand) (int, error) {
				msgs := make([]client.NewMessage, n)
				for i := range msgs {
					msgs[i] = client.NewMessage{Type: "Bench", Data: c.payloadJSON(r)}
				}
				_, err := cl.Append(ctx, c.stream(r.IntN(c.streams)), msgs)
				return n, err
			}
		}
		readStream := func(ctx context.Context, r *rand.Rand) (int, error) {
			msgs, err := cl.ReadStream(ctx, client.StreamQuery{Stream: c.stream(r.IntN(c.streams)), Limit: 100})
			return len(msgs), err
		}
		switch c.workload {
		case "append", "append-stream":
			ops[w] = appendN(1)
		case "evdb-append":
			ops[w] = c.evdbAppend(cf, w)
		case "append-batch":
			ops[w] = appendN(c.batch)
		case "read-stream":
			ops[w] = readStream
		case "read-category":
			ops[w] = func(ctx context.Context, r *rand.Rand) (int, error) {
				msgs, err := cl.ReadCategory(ctx, client.CategoryQuery{Category: c.run, Limit: 100,
					GlobalPosition: 1 + r.Int64N(int64(c.streams)*50), Group: client.ConsumerGroup{Member: int64(w % 4), Size: 4}})
				return len(msgs), err
			}
		case "mixed":
			write := appendN(1)
			ops[w] = func(ctx context.Context, r *rand.Rand) (int, error) {
				if r.Float64() < c.readRatio {
					return readStream(ctx, r)
				}
				return write(ctx, r)
			}
		default:
			return nil, command.Exit(command.ExitUsage, fmt.Errorf("--workload %q: unknown (see --help)", c.workload))
		}
	}
	if !c.index {
		return c.measure(ctx, ops, stderr)
	}
	if err := c.createBenchIndex(ctx, clients.of(0)); err != nil {
		return nil, err
	}
	lag := sampleIndexLag(ctx, clients)
	res, err := c.measure(ctx, ops, stderr)
	lag.finish(res, stderr)
	return res, err
}
