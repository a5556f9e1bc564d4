package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is what `clusterregistry version` and `fanout-deploy --version` print.
type Info struct {
	// Version is the SDK module's version: a release tag such as v0.1.0 when the command was
	// installed with go install ...@version, a pseudo-version for a commit, or "(devel)" for a
	// build from a checkout.
	Version string `json:"version"`
	// Commit, CommitTime and Modified are the checkout's VCS state, for builds from a checkout.
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

// Read returns the running binary's Info.
func Read() Info {
	info := Info{Version: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	const module = "github.com/cluster-registry/sdk"
	if bi.Main.Path == module {
		info.Version = bi.Main.Version
	} else {
		for _, dep := range bi.Deps { // a tool that vendors the SDK
			if dep.Path == module {
				info.Version = dep.Version
			}
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line a command prints: version, commit (with "+modified" for a checkout with
// changes), Go version and platform.
func (i Info) String() string {
	commit := i.Commit
	if commit == "" {
		commit = "unknown commit"
	} else if i.Modified {
		commit += "+modified"
	}
	return fmt.Sprintf("%s (%s, %s, %s)", i.Version, commit, i.GoVersion, i.Platform)
}
