// Package buildinfo reports the version of the kubectl-registry binary.
//
// Release builds set the version, commit and date at link time:
//
//	go build -ldflags "\
//	  -X github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo.Version=v1.2.3 \
//	  -X github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo.Commit=$(git rev-parse HEAD) \
//	  -X github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo.Date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
//	  ./cmd/kubectl-registry
//
// A binary built without those flags (go build, go install module@version) falls back to
// what the Go toolchain stamped into it: the module version and the VCS revision and time.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Defaults of the link-time variables, kept when no -ldflags -X sets them.
const (
	DefaultVersion = "v0.0.0-dev"
	DefaultCommit  = "unknown"
	DefaultDate    = "unknown"
)

// Link-time constants: the only package-level variables, set with
// -ldflags -X github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo.<Name>=<value>
// and never assigned at run time.
var (
	// Version is the semantic version of the release, e.g. v1.2.3.
	Version = DefaultVersion
	// Commit is the VCS revision the binary was built from.
	Commit = DefaultCommit
	// Date is the build date, RFC 3339 in UTC.
	Date = DefaultDate
)

// Info describes a build of the binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// String renders the Info on one line, e.g.
// "v1.2.3 (commit 0123abc, built 2026-01-02T03:04:05Z, go1.26.8, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.Version, i.Commit, i.BuildDate, i.GoVersion, i.Platform)
}

// Get returns the build information of the running binary.
func Get() Info {
	info := Info{
		Version:   Version,
		Commit:    Commit,
		BuildDate: Date,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		fillFromBuildInfo(&info, bi)
	}
	return info
}

// fillFromBuildInfo replaces the fields still at their defaults with what the Go
// toolchain stamped into the binary.
func fillFromBuildInfo(info *Info, bi *debug.BuildInfo) {
	if info.Version == DefaultVersion && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	var revision, vcsTime string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if info.Commit == DefaultCommit && revision != "" {
		info.Commit = revision
		if modified && !strings.HasSuffix(revision, "-dirty") {
			info.Commit += "-dirty"
		}
	}
	if info.BuildDate == DefaultDate && vcsTime != "" {
		info.BuildDate = vcsTime
	}
}
