// Package buildinfo says which Skald a binary is: the release version
// written in the source, and the commit and Go version the toolchain
// recorded when it built the binary.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is Skald's version, semantic versioning 2.0.0 without a leading
// v. It lives here, in the source, so every binary built from a commit
// reports the same version however it was built (go build, go run,
// go install, the image): a release commit bumps it and is tagged
// v<Version>. Commits between releases keep the last release's number;
// Info.Revision tells them apart.
const Version = "0.1.0"

// EventoDBAPI is the level of the EventoDB HTTP API Skald implements
// (docs/eventodb-api.md): the EventoDB release whose API it follows.
const EventoDBAPI = "0.7.0"

// Info describes a binary.
type Info struct {
	// Version is the Version constant.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from (the full
	// hash), empty when Go recorded none (go test, or a tree without
	// version control).
	Revision string `json:"revision,omitempty"`
	// Modified reports that the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go release that built the binary.
	GoVersion string `json:"go"`
}

// Read returns this binary's Info.
func Read() Info {
	info := Info{Version: Version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// ShortRevision is the revision's first 12 characters ("" when unknown),
// with "-modified" when the tree had changes.
func (i Info) ShortRevision() string {
	if i.Revision == "" {
		return ""
	}
	r := i.Revision[:min(len(i.Revision), 12)]
	if i.Modified {
		r += "-modified"
	}
	return r
}

// String is one line for people: "0.1.0 (revision 0b64ecc3a1f2, go1.26.8)".
func (i Info) String() string {
	s := i.Version + " ("
	if r := i.ShortRevision(); r != "" {
		s += "revision " + r + ", "
	}
	return s + i.GoVersion + ")"
}
