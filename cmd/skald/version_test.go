package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// semver is semantic versioning 2.0.0 (no leading v).
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// TestVersionIsSkaldsEverywhere: skald version and GET /version report the
// same Skald version, semver; /version also names the EventoDB protocol
// version that sys.version keeps for the SDKs.
func TestVersionIsSkaldsEverywhere(t *testing.T) {
	out, _, code := runCLI(t, nil, "version")
	cli := strings.TrimSpace(out)
	if code != 0 || !semver.MatchString(cli) {
		t.Fatalf("skald version: exit %d, %q is not semver", code, cli)
	}
	p := startServer(t, "")
	resp, err := http.Get("http://" + p.addr + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Version, Eventodb string }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Version != cli || got.Eventodb != "0.7.0" {
		t.Fatalf("GET /version = %+v, want version %q (skald version) and eventodb 0.7.0", got, cli)
	}
}
