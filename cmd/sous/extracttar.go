package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// newExtractTarCmd is `sous files extract-tar`: files.extract_tar, with the
// daemon's files.extract_tar.options extension behind --modes archive and
// --keep-archive.
func newExtractTarCmd(streams *IO) *cobra.Command {
	var modes string
	var keep bool
	return queryCmd{
		use:   "extract-tar ARCHIVE DEST",
		short: "Extract a .tar.gz into DEST (wiped first; the archive is consumed unless --keep-archive)",
		example: "  sous files extract-tar /tmp/release.tar.gz /opt/app\n" +
			"  sous files extract-tar --modes archive --keep-archive release.tar.gz out",
		nargs: [2]int{2, 2}, method: "files.extract_tar",
		params: func(a []string, local bool) map[string]any {
			return map[string]any{"archivePath": pathArg(a, 0, local), "destDir": pathArg(a, 1, local)}
		},
		result: func() any { return &wire.ExtractResult{} },
		// The extension's params go only to a daemon that advertises it:
		// one without would ignore them, consume the archive and give
		// owner-only modes.
		before: func(ctx context.Context, c callConn, params map[string]any) error {
			if modes == wire.ModesArchive {
				return c.RequireFeature(ctx, wire.FeatureExtractOptions, "--modes archive")
			}
			if keep {
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
	}.build(streams, func(cmd *cobra.Command, params map[string]any) {
		cmd.Flags().StringVar(&modes, "modes", wire.ModesOwner,
			"permission bits of the entries: owner (files 0600, directories 0700, as claustrum) or archive "+
				"(the archive's, as tar without -p: minus the daemon's umask, never setuid/setgid/sticky or writable by others)")
		cmd.Flags().BoolVar(&keep, "keep-archive", false, "leave ARCHIVE in place instead of consuming it")
		cmd.PreRunE = func(*cobra.Command, []string) error {
			switch modes {
			case wire.ModesOwner:
			case wire.ModesArchive:
				params["modes"] = modes
			default:
				return usageErrorf("--modes: want %s or %s, got %q", wire.ModesOwner, wire.ModesArchive, modes)
			}
			if keep {
				params["keepArchive"] = true
			}
			return nil
		}
	})
}
