package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/spf13/cobra"
)

// Build information, set by the linker:
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=abc -X main.buildTime=2026-11-22T10:00:00Z"
//
// Without them, version and commit come from the module's build info.
var (
	version   = ""
	commit    = ""
	buildTime = ""
)

// buildInfo is what `sous version` prints and the daemon reports.
type buildInfo struct {
	Version, Commit, Time string
}

// currentBuild is this binary's buildInfo, read once: a run asked for it
// twice (the root's --version, the notifications' user agent), and
// parsing the embedded module list each time showed in the start's profile
// (docs/PERFORMANCE.md, the start row).
var currentBuild = sync.OnceValue(readBuild)

func readBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Time: buildTime}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Time == "" {
					b.Time = s.Value
				}
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Time == "" {
		b.Time = "unknown"
	}
	return b
}

// VersionOptions are what `sous version` needs: it has no flags.
type VersionOptions struct {
	IO *IO
}

func newCmdVersion(f *Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IO}
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, commit, build time and platform",
		Example: "  sous version",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
}

func versionRun(opts *VersionOptions) error {
	b := currentBuild()
	fmt.Fprintf(opts.IO.Out, "sous %s\ncommit: %s\nbuilt: %s\ngo: %s %s/%s\n",
		b.Version, b.Commit, b.Time, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
