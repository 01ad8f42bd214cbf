package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// ExtractTarOptions are the flags and arguments of `sous files extract-tar
// ARCHIVE DEST`: files.extract_tar, with the daemon's
// files.extract_tar.options extension behind --modes archive and
// --keep-archive.
type ExtractTarOptions struct {
	QueryOptions
	Modes       string // wire.ModesOwner or wire.ModesArchive
	KeepArchive bool
}

func newCmdExtractTar(f *Factory, runF func(*ExtractTarOptions) error) *cobra.Command {
	opts := &ExtractTarOptions{QueryOptions: *newQueryOptions(f)}
	cmd := newQueryCmd(&opts.QueryOptions, queryUsage{
		use:   "extract-tar ARCHIVE DEST",
		short: "Extract a .tar.gz into DEST (wiped first; the archive is consumed unless --keep-archive)",
		example: "  sous files extract-tar /tmp/release.tar.gz /opt/app\n" +
			"  sous files extract-tar --modes archive --keep-archive release.tar.gz out",
		nargs: [2]int{2, 2},
	}, func() error {
		if opts.Modes != wire.ModesOwner && opts.Modes != wire.ModesArchive {
			return usageErrorf("--modes: want %s or %s, got %q", wire.ModesOwner, wire.ModesArchive, opts.Modes)
		}
		if runF != nil {
			return runF(opts)
		}
		return extractTarRun(opts)
	})
	cmd.Flags().StringVar(&opts.Modes, "modes", wire.ModesOwner,
		"permission bits of the entries: owner (files 0600, directories 0700, as claustrum) or archive "+
			"(the archive's, as tar without -p: minus the daemon's umask, never setuid/setgid/sticky or writable by others)")
	cmd.Flags().BoolVar(&opts.KeepArchive, "keep-archive", false, "leave ARCHIVE in place instead of consuming it")
	return cmd
}

func extractTarRun(opts *ExtractTarOptions) error {
	return opts.call(func(local bool) query {
		params := map[string]any{"archivePath": pathArg(opts.Args, 0, local), "destDir": pathArg(opts.Args, 1, local)}
		// The extension's params go only to a daemon that advertises it
		// (before): one without would ignore them, consume the archive and
		// give owner-only modes.
		if opts.Modes == wire.ModesArchive {
			params["modes"] = opts.Modes
		}
		if opts.KeepArchive {
			params["keepArchive"] = true
		}
		return query{
			method: "files.extract_tar", params: params, result: &wire.ExtractResult{},
			before: func(ctx context.Context, c callConn, _ map[string]any) error {
				if opts.Modes == wire.ModesArchive {
					return c.RequireFeature(ctx, wire.FeatureExtractOptions, "--modes archive")
				}
				if opts.KeepArchive {
					return c.RequireFeature(ctx, wire.FeatureExtractOptions, "--keep-archive")
				}
				return nil
			},
			human: func(w io.Writer, res any) error {
				r := res.(*wire.ExtractResult)
				if r.Success && r.FileCount != nil {
					fmt.Fprintf(w, "extracted %d %s\n", *r.FileCount, plural(*r.FileCount, "file", "files"))
				}
				return nil
			},
			check: func(res any) error {
				if r := res.(*wire.ExtractResult); !r.Success {
					return fmt.Errorf("%s", r.Error)
				}
				return nil
			},
		}
	})
}
