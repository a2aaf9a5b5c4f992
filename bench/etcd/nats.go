package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publish is the NATS JetStream side: one connection per caller, callers
// spread round-robin over the servers, each doing synchronous publishes
// (waits for the PubAck: stored on a quorum of the R3 file stream) to
// subjects spread like Skald's streams, all in one JetStream stream.
func publish(args []string) error {
	fs := flag.NewFlagSet("nats", flag.ContinueOnError)
	servers := fs.String("servers", "nats://127.0.0.1:4222", "comma-separated server URLs")
	concurrency := fs.Int("concurrency", 64, "concurrent callers, one connection each (each has one publish outstanding)")
	valueBytes := fs.Int("value-bytes", 200, "bytes per message")
	subjects := fs.Int("subjects", 1000, "distinct subjects the publishes spread over")
	duration := fs.Duration("duration", 10*time.Second, "how long to measure")
	replicas := fs.Int("replicas", 3, "replicas of the stream")
	ready := fs.Duration("ready-timeout", 60*time.Second, "how long to wait for the cluster to connect and place the stream")
	if err := fs.Parse(args); err != nil {
		return err
	}
	urls := strings.Split(*servers, ",")
	deadline := time.Now().Add(*ready)
	// retry runs f until it succeeds or the ready deadline passes.
	retry := func(what string, f func(ctx context.Context) error) error {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := f(ctx)
			cancel()
			if err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s after %v: %w", what, *ready, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	conns := make([]*nats.Conn, *concurrency)
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	for w := range conns {
		// Caller w's first server is urls[w%n]; the others only for reconnects.
		i := w % len(urls)
		order := append(append([]string{}, urls[i:]...), urls[:i]...)
		if err := retry("connect", func(context.Context) (err error) {
			conns[w], err = nats.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.Name(fmt.Sprintf("bench-%d", w)))
			return err
		}); err != nil {
			return err
		}
	}
	js, err := jetstream.New(conns[0])
	if err != nil {
		return err
	}
	cfg := jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage,
		Replicas: *replicas, Retention: jetstream.LimitsPolicy, PersistMode: jetstream.DefaultPersistMode}
	var stream jetstream.Stream
	if err := retry("create stream", func(ctx context.Context) (err error) {
		stream, err = js.CreateOrUpdateStream(ctx, cfg)
		return err
	}); err != nil {
		return err
	}
	if err := retry("stream replicas current", func(ctx context.Context) error {
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return errors.New("no stream leader")
		}
		current := 0
		for _, p := range info.Cluster.Replicas {
			if p.Current {
				current++
			}
		}
		if current < *replicas-1 {
			return fmt.Errorf("%d of %d followers current", current, *replicas-1)
		}
		return nil
	}); err != nil {
		return err
	}
	value := []byte(strings.Repeat("x", *valueBytes))
	if err := retry("first publish", func(ctx context.Context) error {
		_, err := js.Publish(ctx, "bench.warmup", value)
		return err
	}); err != nil {
		return err
	}
	subj := make([]string, *subjects)
	for i := range subj {
		subj[i] = fmt.Sprintf("bench.%d", i)
	}

	run := closedLoop(len(conns), *duration, func(w int) (func(context.Context, *rand.Rand) error, error) {
		js, err := jetstream.New(conns[w])
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, rng *rand.Rand) error {
			_, err := js.Publish(ctx, subj[rng.IntN(len(subj))], value)
			return err
		}, nil
	})
	if run.firstErr != "" {
		fmt.Fprintf(os.Stderr, "nats bench: %d errors, first: %s\n", run.errs, run.firstErr)
	}
	elapsed := run.elapsed.Seconds()
	res := result{Workload: "nats-publish", Concurrency: *concurrency, DurationS: elapsed, Ops: run.ops, Errors: run.errs,
		OpsPerSec: float64(run.ops) / elapsed, LatencyMS: quantiles(run.lat)}
	return json.NewEncoder(os.Stdout).Encode(res)
}
