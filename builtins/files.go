package builtins

import (
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

func filesEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "files", Host: true, Sig: "files",
			Doc: "Files on the host, read through the daemon. Relative paths are relative to the daemon's directory " +
				"(for the embedded daemon, the directory sous runs in)."},
		{Name: "files.stat", Host: true, Sig: "files.stat(path) -> struct(exists, is_dir, size, mode)",
			Doc: "Describes path; a missing path gives exists=False. mode is the ls-style string (\"-rw-r--r--\").",
			Fn:  filesStat},
		{Name: "files.list", Host: true, Sig: "files.list(path) -> list of struct(name, path, is_dir)",
			Doc: "The entries of directory path, sorted by name, hidden entries (a leading \".\") skipped. " +
				"A missing directory fails.",
			Fn: filesList},
		{Name: "files.read", Host: true, Sig: "files.read(path, *, max_bytes=None) -> string or None",
			Doc: "The contents of path, or None when it does not exist. A directory, or a file larger than max_bytes, fails. " +
				"The protocol carries the content as text, so bytes that are not UTF-8 arrive as U+FFFD; " +
				"for a binary file's exact bytes, `run(\"cat\", [path]).stdout`.",
			Fn: filesRead},
		{Name: "files.validate", Host: true, Sig: "files.validate(path) -> struct(valid, is_dir, error)",
			Doc: "Whether path exists; error is the daemon's reason when it does not (\"\" otherwise).",
			Fn:  filesValidate},
		{Name: "extract_tar", Host: true, Sig: "extract_tar(archive, dest) -> int",
			Doc: "Extracts the .tar.gz archive into dest on the host with the daemon's semantics: dest (absolute) is " +
				"wiped first, the archive is consumed (removed once opened), entries get owner-only modes, an empty " +
				".synced marker is written. Returns the number of files; any failure fails with the daemon's error text.",
			Fn: extractTar},
	}
}

func record(fields starlark.StringDict) *starlarkstruct.Struct {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, fields)
}

func filesStat(c *runtime.Call) (starlark.Value, error) {
	var path string
	if err := bind(c, 1, req("path", str(&path))); err != nil {
		return nil, err
	}
	var res wire.StatResult
	if err := hostCall(c, path, "files.stat", wire.PathParams{Path: path}, &res); err != nil {
		return nil, err
	}
	return record(starlark.StringDict{
		"exists": starlark.Bool(res.Exists),
		"is_dir": starlark.Bool(res.IsDir),
		"size":   starlark.MakeInt64(res.Size),
		"mode":   starlark.String(res.Mode),
	}), nil
}

func filesList(c *runtime.Call) (starlark.Value, error) {
	var path string
	if err := bind(c, 1, req("path", str(&path))); err != nil {
		return nil, err
	}
	var res wire.ListResult
	if err := hostCall(c, path, "files.list", wire.PathParams{Path: path}, &res); err != nil {
		return nil, err
	}
	out := make([]starlark.Value, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = record(starlark.StringDict{
			"name":   starlark.String(e.Name),
			"path":   starlark.String(e.Path),
			"is_dir": starlark.Bool(e.IsDir),
		})
	}
	return starlark.NewList(out), nil
}

func filesRead(c *runtime.Call) (starlark.Value, error) {
	var path string
	var maxBytes *int64
	if err := bind(c, 1, req("path", str(&path)), opt("max_bytes", optInteger(&maxBytes, 0))); err != nil {
		return nil, err
	}
	var res wire.ReadResult
	if err := hostCall(c, path, "files.read", wire.PathParams{Path: path, MaxBytes: maxBytes}, &res); err != nil {
		return nil, err
	}
	if !res.Exists {
		return starlark.None, nil
	}
	return starlark.String(res.Content), nil
}

func filesValidate(c *runtime.Call) (starlark.Value, error) {
	var path string
	if err := bind(c, 1, req("path", str(&path))); err != nil {
		return nil, err
	}
	var res wire.ValidateResult
	if err := hostCall(c, path, "files.validate", wire.PathParams{Path: path}, &res); err != nil {
		return nil, err
	}
	return record(starlark.StringDict{
		"valid":  starlark.Bool(res.Valid),
		"is_dir": starlark.Bool(res.IsDir),
		"error":  starlark.String(res.Error),
	}), nil
}

func extractTar(c *runtime.Call) (starlark.Value, error) {
	var archive, dest string
	if err := bind(c, 2, req("archive", str(&archive)), req("dest", str(&dest))); err != nil {
		return nil, err
	}
	// Checked here to name the arguments: the daemon's refusal of an empty
	// one names its protocol fields (archivePath, destDir). A dest it
	// refuses otherwise (relative, /) fails with its own words, as the
	// contract has every success:false do.
	switch {
	case archive == "":
		return nil, c.Errorf("archive: want the path of a .tar.gz on the host, got \"\"")
	case dest == "":
		return nil, c.Errorf("dest: want an absolute directory on the host, got \"\"")
	}
	var res wire.ExtractResult
	if err := hostCall(c, archive, "files.extract_tar", wire.PathParams{ArchivePath: archive, DestDir: dest}, &res); err != nil {
		return nil, err
	}
	if !res.Success {
		return nil, c.Errorf("%s: %s", archive, res.Error)
	}
	n := 0
	if res.FileCount != nil {
		n = *res.FileCount
	}
	return starlark.MakeInt(n), nil
}
