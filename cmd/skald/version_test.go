package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/cli"
	"github.com/skalddb/skald/internal/buildinfo"
)

// semver is semantic versioning 2.0.0 (no leading v).
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// TestVersionIsSkaldsEverywhere: skald version, GET /version and EventoDB's
// sys.version report the one version written in the source (semver), with
// the commit and Go release the binary's build info records; /version
// keeps the EventoDB API level in a field of its own. (Before, /version
// said 0.0.0-dev and sys.version the EventoDB level 0.7.0.)
func TestVersionIsSkaldsEverywhere(t *testing.T) {
	t.Parallel()
	if !semver.MatchString(buildinfo.Version) {
		t.Fatalf("buildinfo.Version %q is not semver", buildinfo.Version)
	}
	// What Go recorded in the binary under test: the reference.
	mod, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := cli.VersionJSON{Info: buildinfo.Info{Version: buildinfo.Version}, EventoDB: "0.7.0"}
	for line := range strings.Lines(string(mod)) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && strings.HasSuffix(f[0], ":"):
			want.GoVersion = f[1] // "<path>: go1.26.8"
		case len(f) == 3 && f[0] == "build" && f[1] == "vcs.revision":
			want.Revision = f[2]
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.modified="):
			want.Modified = f[1] == "vcs.modified=true"
		}
	}
	if want.GoVersion == "" {
		t.Fatalf("no Go version in go version -m: %s", mod)
	}

	out, errOut, code := runCLI(t, nil, "version", "-o", "json")
	var fromCLI cli.VersionJSON
	if code != 0 || json.Unmarshal([]byte(out), &fromCLI) != nil {
		t.Fatalf("skald version -o json: exit %d: %s %s", code, out, errOut)
	}
	if fromCLI != want {
		t.Fatalf("skald version -o json = %+v, want %+v", fromCLI, want)
	}
	out, _, code = runCLI(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "skald "+want.Version+"\n") || !strings.Contains(out, want.GoVersion) ||
		!strings.Contains(out, "eventodb api: 0.7.0") || (want.Revision != "" && !strings.Contains(out, want.Revision)) {
		t.Fatalf("skald version: exit %d:\n%s", code, out)
	}

	p := startServer(t, "", "--admin-token", testAdmin)
	resp, err := http.Get("http://" + p.addr + "/version")
	if err != nil {
		t.Fatal(err)
	}
	var got cli.VersionJSON
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got != want {
		t.Fatalf("GET /version = %+v (%v), want %+v", got, err, want)
	}

	req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/rpc", bytes.NewReader([]byte(`["sys.version"]`)))
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sys string
	err = json.NewDecoder(resp.Body).Decode(&sys)
	resp.Body.Close()
	if err != nil || sys != want.Version {
		t.Fatalf("sys.version = %q (%v), want %q", sys, err, want.Version)
	}
}
