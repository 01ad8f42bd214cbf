package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// newCmdFiles is the files group: stat, list, read, validate and
// extract-tar.
func newCmdFiles(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "Inspect files and extract archives on a daemon's host",
		Example: `  sous files list /src/app
  sous files read --remote ssh://build /etc/os-release
  sous files extract-tar release.tar.gz /opt/app`,
	}
	cmd.AddCommand(
		newCmdFilesStat(f, nil),
		newCmdFilesList(f, nil),
		newCmdFilesRead(f, nil),
		newCmdFilesValidate(f, nil),
		newCmdExtractTar(f, nil),
	)
	return cmd
}

// pathParams are the params of a files call on the PATH argument.
func pathParams(args []string, local bool) map[string]any {
	return map[string]any{"path": pathArg(args, 0, local)}
}

func newCmdFilesStat(f *Factory, runF func(*QueryOptions) error) *cobra.Command {
	opts := newQueryOptions(f)
	return newQueryCmd(opts, queryUsage{
		use: "stat PATH", short: "Existence, type, size and mode of a path",
		example: "  sous files stat /etc/hosts", nargs: [2]int{1, 1},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return filesStatRun(opts)
	})
}

func filesStatRun(opts *QueryOptions) error {
	return opts.call(func(local bool) query {
		return query{
			method: "files.stat", params: pathParams(opts.Args, local), result: &wire.StatResult{},
			human: func(w io.Writer, res any) error {
				r := res.(*wire.StatResult)
				if !r.Exists {
					_, err := fmt.Fprintln(w, "does not exist")
					return err
				}
				_, err := fmt.Fprintf(w, "%s %d\n", r.Mode, r.Size)
				return err
			},
			check: func(res any) error {
				if !res.(*wire.StatResult).Exists {
					return fmt.Errorf("path does not exist")
				}
				return nil
			},
			humanSaysFailure: true,
		}
	})
}

func newCmdFilesList(f *Factory, runF func(*QueryOptions) error) *cobra.Command {
	opts := newQueryOptions(f)
	return newQueryCmd(opts, queryUsage{
		use: "list PATH", short: "Entries of a directory, sorted, hidden ones skipped",
		example: "  sous files list .", nargs: [2]int{1, 1},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return filesListRun(opts)
	})
}

func filesListRun(opts *QueryOptions) error {
	return opts.call(func(local bool) query {
		return query{
			method: "files.list", params: pathParams(opts.Args, local), result: &wire.ListResult{},
			human: func(w io.Writer, res any) error {
				for _, e := range res.(*wire.ListResult).Entries {
					suffix := ""
					if e.IsDir {
						suffix = "/"
					}
					fmt.Fprintln(w, e.Name+suffix)
				}
				return nil
			},
		}
	})
}

// FilesReadOptions are the flags and argument of `sous files read PATH`.
type FilesReadOptions struct {
	QueryOptions
	// MaxBytes is --max-bytes, sent only when given (MaxBytesSet).
	MaxBytes    int64
	MaxBytesSet bool
}

func newCmdFilesRead(f *Factory, runF func(*FilesReadOptions) error) *cobra.Command {
	opts := &FilesReadOptions{QueryOptions: *newQueryOptions(f)}
	var cmd *cobra.Command
	cmd = newQueryCmd(&opts.QueryOptions, queryUsage{
		use: "read PATH", short: "Print a text file's content (refuses one that is not UTF-8)",
		example: "  sous files read /etc/os-release\n  sous files read big.log --max-bytes 1048576", nargs: [2]int{1, 1},
	}, func() error {
		opts.MaxBytesSet = cmd.Flags().Changed("max-bytes")
		if runF != nil {
			return runF(opts)
		}
		return filesReadRun(opts)
	})
	cmd.Flags().Int64Var(&opts.MaxBytes, "max-bytes", 0, "refuse files larger than this many bytes")
	return cmd
}

func filesReadRun(opts *FilesReadOptions) error {
	return opts.call(func(local bool) query {
		params := pathParams(opts.Args, local)
		if opts.MaxBytesSet {
			params["maxBytes"] = opts.MaxBytes
		}
		return query{
			method: "files.read", params: params, result: &wire.ReadResult{},
			human: func(w io.Writer, res any) error {
				_, err := io.WriteString(w, res.(*wire.ReadResult).Content)
				return err
			},
			check: func(res any) error {
				if !res.(*wire.ReadResult).Exists {
					return fmt.Errorf("no such file")
				}
				return nil
			},
			verify: refuseBinary,
		}
	})
}

func newCmdFilesValidate(f *Factory, runF func(*QueryOptions) error) *cobra.Command {
	opts := newQueryOptions(f)
	return newQueryCmd(opts, queryUsage{
		use: "validate PATH", short: "Whether a path exists, and whether it is a directory",
		example: "  sous files validate /src/app", nargs: [2]int{1, 1},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return filesValidateRun(opts)
	})
}

func filesValidateRun(opts *QueryOptions) error {
	return opts.call(func(local bool) query {
		return query{
			method: "files.validate", params: pathParams(opts.Args, local), result: &wire.ValidateResult{},
			human: func(w io.Writer, res any) error {
				r := res.(*wire.ValidateResult)
				switch {
				case !r.Valid:
					fmt.Fprintln(w, "invalid:", r.Error)
				case r.IsDir:
					fmt.Fprintln(w, "valid directory")
				default:
					fmt.Fprintln(w, "valid file")
				}
				return nil
			},
			check: func(res any) error {
				if r := res.(*wire.ValidateResult); !r.Valid {
					return fmt.Errorf("%s", r.Error)
				}
				return nil
			},
			humanSaysFailure: true,
		}
	})
}

// refuseBinary refuses to print a files.read result that lost bytes: the
// protocol carries content as a JSON string, so bytes that are not UTF-8
// arrive as U+FFFD, and printing them would write a corrupted copy and exit
// 0. Only content with a U+FFFD is suspect; it is a loss when the file's
// size (files.stat) differs from the bytes that arrived.
func refuseBinary(ctx context.Context, c callConn, params map[string]any, res any) error {
	r := res.(*wire.ReadResult)
	if !r.Exists || !strings.ContainsRune(r.Content, utf8.RuneError) {
		return nil
	}
	var st wire.StatResult
	if err := c.Call(ctx, "files.stat", map[string]any{"path": params["path"]}, &st); err != nil {
		return fmt.Errorf("files.stat: %w", err)
	}
	if st.Size == int64(len(r.Content)) {
		return nil // a real U+FFFD
	}
	return fmt.Errorf("not UTF-8 text (%d bytes on disk, %d after the bytes that are not UTF-8 were replaced): "+
		"files read carries text only; copy a binary file with `sous exec -- cat PATH > COPY`", st.Size, len(r.Content))
}

// plural picks the word for n of something.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
