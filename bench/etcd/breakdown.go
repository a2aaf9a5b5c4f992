package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"

	"github.com/google/pprof/profile"
)

// bucket is one row of the write-path breakdown: a sample belongs to the
// first bucket (in table order) one of whose frames matches.
type bucket struct {
	name string
	re   *regexp.Regexp
}

// writePathBuckets splits a Skald server's CPU profile by what the write
// path spends it on (bench/README.md). Order matters: GC first (it runs
// under any goroutine), then the storage layers, then the request path.
var writePathBuckets = []bucket{
	{"GC", regexp.MustCompile(`^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge|gcAssistAlloc|markroot|gcDrain)`)},
	{"Raft log store", regexp.MustCompile(`hashicorp/raft-wal|hashicorp/raft-boltdb|go\.etcd\.io/bbolt`)},
	{"Pebble memtable inserts", regexp.MustCompile(`pebble/v2\.\(\*memTable\)\.apply`)},
	{"Pebble flushes, compactions, WAL", regexp.MustCompile(`pebble/v2\.\(\*DB\)\.(flush|compact|runCompaction)|pebble/v2/record\.\(\*LogWriter\)`)},
	{"apply logic (decode, validate, keys)", regexp.MustCompile(`skald/fsm\.\(\*Store\)\.ApplyBatch`)},
	{"Raft FSM dispatch", regexp.MustCompile(`raft\.\(\*Raft\)\.(runFSM|processLogs)`)},
	{"follower: forwarding client", regexp.MustCompile(`skald/node\.\(\*forwarder\)|skald/node\.\(\*peerClients\)`)},
	{"leader: peer ApplyBatch handler", regexp.MustCompile(`peerv1connect|skald/node\.\(\*peerServer\)`)},
	{"client API handlers (Connect, EventoDB)", regexp.MustCompile(`skaldv1connect\.|skald/rpc\.\(\*eventStore\)|skald/rpc\.\(\*evdb|skald/rpc\.evdb`)},
	{"Raft transport and replication", regexp.MustCompile(`skald/node/transport\.\(\*(binaryWire|Raft)\)|raft\.\(\*NetworkTransport\)|raft\.\(\*netPipeline\)|raft\.sendRPC|raft\.\(\*Raft\)\.(replicate|pipeline|appendEntries|processRPC|heartbeat)|raft\.decodeResponse`)},
	{"Raft leader loop", regexp.MustCompile(`raft\.\(\*Raft\)\.(leaderLoop|dispatchLogs|runLeader)|raft\.\(\*commitment\)`)},
	{"net/http around the handlers", regexp.MustCompile(`^net/http\.|golang\.org/x/net/http2`)},
	{"scheduler, netpoll", regexp.MustCompile(`^runtime\.(mcall|schedule|findRunnable|park_m|netpoll|goexit0|mstart|sysmon|morestack)`)},
}

// shares returns each bucket's share (0..1) of the profile's CPU, and the
// profile's total CPU in seconds. Samples no bucket matches go to "other".
func shares(p *profile.Profile, buckets []bucket) (map[string]float64, float64, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, 0, errors.New("not a CPU profile (no cpu sample type)")
	}
	out := map[string]float64{}
	var total float64
	for _, s := range p.Sample {
		v := float64(s.Value[idx])
		total += v
		name := "other"
	find:
		for _, b := range buckets {
			for _, loc := range s.Location {
				for _, line := range loc.Line {
					if line.Function != nil && b.re.MatchString(line.Function.Name) {
						name = b.name
						break find
					}
				}
			}
		}
		out[name] += v
	}
	if total == 0 {
		return nil, 0, errors.New("profile holds no samples")
	}
	for k := range out {
		out[k] /= total
	}
	return out, total / 1e9, nil
}

// roleCPU is one node's profile: its role and what shares gives.
type roleCPU struct {
	leader  bool
	share   map[string]float64
	seconds float64
}

// printBreakdown prints, per bucket, the µs per operation on the leader,
// on an average follower and over all nodes, scaling the profiles' CPU to
// perOp µs per operation over all nodes (what skald bench measured in the
// same run; profiles lose samples, so their own totals are only weights).
func printBreakdown(w io.Writer, nodes []roleCPU, perOp float64) error {
	var total float64
	followers := 0
	for _, n := range nodes {
		total += n.seconds
		if !n.leader {
			followers++
		}
	}
	if total == 0 || followers == 0 || followers == len(nodes) {
		return errors.New("need one leader profile and at least one follower profile")
	}
	type row struct {
		name                  string
		leader, follower, all float64
	}
	rows := map[string]*row{}
	var lsum, fsum float64
	for _, n := range nodes {
		for name, sh := range n.share {
			r := rows[name]
			if r == nil {
				r = &row{name: name}
				rows[name] = r
			}
			us := sh * n.seconds / total * perOp
			r.all += us
			if n.leader {
				r.leader += us
				lsum += us
			} else {
				r.follower += us / float64(followers)
				fsum += us / float64(followers)
			}
		}
	}
	list := make([]*row, 0, len(rows))
	for _, r := range rows {
		list = append(list, r)
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].all > list[j].all || list[i].all == list[j].all && list[i].name < list[j].name
	})
	fmt.Fprintln(w, "| µs of server CPU per operation | leader | each follower | all nodes | share |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range list {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.0f %% |\n", r.name, r.leader, r.follower, r.all, 100*r.all/perOp)
	}
	fmt.Fprintf(w, "| **total** | %.0f | %.0f | %.0f | |\n", lsum, fsum, perOp)
	return nil
}

// breakdown: breakdown --per-op US --leader L.pprof FOLLOWER.pprof...
func breakdown(args []string) error {
	fs := flag.NewFlagSet("breakdown", flag.ContinueOnError)
	perOp := fs.Float64("per-op", 0, "server CPU per operation over all nodes, µs, as skald bench measured it")
	leader := fs.String("leader", "", "the leader's CPU profile")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *perOp <= 0 || *leader == "" || fs.NArg() == 0 {
		return errors.New("usage: breakdown --per-op US --leader LEADER.pprof FOLLOWER.pprof...")
	}
	var nodes []roleCPU
	for i, path := range append([]string{*leader}, fs.Args()...) {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		sh, secs, err := shares(p, writePathBuckets)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		nodes = append(nodes, roleCPU{leader: i == 0, share: sh, seconds: secs})
	}
	return printBreakdown(os.Stdout, nodes, *perOp)
}
