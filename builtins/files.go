package builtins

import (
	"fmt"
	"path/filepath"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

func filesEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "files", Host: true, Sig: "files",
			Doc: "Files on the host, read through the daemon. " + relativePathsDoc},
		{Name: "files.stat", Journal: runtime.JournalAnswer, Host: true, Sig: "files.stat(path) -> struct(exists, is_dir, size, mode)",
			Doc: "Describes path; a missing path gives exists=False. mode is the ls-style string (\"-rw-r--r--\").",
			Fn:  filesStat},
		{Name: "files.list", Journal: runtime.JournalAnswer, Host: true, Sig: "files.list(path) -> list of struct(name, path, is_dir)",
			Doc: "The entries of directory path, sorted by name, hidden entries (a leading \".\") skipped. " +
				"A missing directory fails.",
			Fn: filesList},
		{Name: "files.read", Journal: runtime.JournalAnswer, Host: true, Sig: "files.read(path, *, max_bytes=None) -> string or None",
			Doc: "The contents of path, or None when it does not exist. A directory, or a file larger than max_bytes, fails. " +
				"The protocol carries the content as text, so bytes that are not UTF-8 arrive as U+FFFD; " +
				"for a binary file's exact bytes, `run(\"cat\", [path]).stdout`.",
			Fn: filesRead},
		{Name: "files.validate", Journal: runtime.JournalAnswer, Host: true, Sig: "files.validate(path) -> struct(valid, is_dir, error)",
			Doc: "Whether path exists; error is the daemon's reason when it does not (\"\" otherwise).",
			Fn:  filesValidate},
		{Name: "extract_tar", Journal: runtime.JournalEffect, Rejoin: true, Host: true, Sig: `extract_tar(archive, dest, *, modes="owner", keep_archive=False) -> int`,
			Doc: "Extracts the .tar.gz archive into directory dest on the host, with the daemon's semantics: " +
				"dest is wiped first (everything in it is deleted), the archive is consumed (deleted once opened, " +
				"whatever the outcome), files get mode 0600 and directories 0700 whatever the archive says, and an " +
				"empty .synced marker is written on success. Returns the number of files; any failure fails with the " +
				"daemon's error text, and dest keeps what was extracted before the failure, without .synced. " +
				"modes=\"archive\" keeps the archive's permission bits instead, as tar without -p: minus the daemon's " +
				"umask, never set-user-ID, set-group-ID, sticky or writable by others (directories keep rwx for their " +
				"owner); keep_archive=True leaves the archive in place. Both need the daemon extension " +
				"files.extract_tar.options (the embedded daemon and sous daemon have it); a daemon without it fails " +
				"the call before anything is touched. The daemon bounds what one archive may unpack (sous daemon " +
				"serve --extract-max-bytes, --extract-max-ratio; by default 16 GiB, and 200 times the archive's " +
				"size past 64 MiB): an archive past them fails and leaves dest empty. " + relativePathsDoc +
				" On a remote host dest must be absolute.",
			Fn: extractTar},
	}
}

// relativePathsDoc says how the path arguments of files.* and extract_tar
// are resolved (paths.go).
const relativePathsDoc = "A relative path is taken from the recipe's working directory (the directory sous runs in) " +
	"on a local host (the embedded daemon, or unix://); a remote host (ssh://, ws://) resolves it against its " +
	"daemon's directory."

func record(fields starlark.StringDict) *starlarkstruct.Struct {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, fields)
}

func filesStat(c *runtime.Call) (starlark.Value, error) {
	var path string
	if err := bind(c, 1, req("path", str(&path))); err != nil {
		return nil, err
	}
	sent, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	var res wire.StatResult
	if err := hostCall(c, path, "files.stat", wire.PathParams{Path: sent}, &res); err != nil {
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
	abs, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	if err := hostCall(c, path, "files.list", wire.PathParams{Path: abs}, &res); err != nil {
		return nil, err
	}
	out := make([]starlark.Value, len(res.Entries))
	for i, e := range res.Entries {
		if abs != path {
			// Relative in, relative out: the entries' paths start with
			// the path the recipe gave, as they do on a remote host.
			e.Path = filepath.Join(path, e.Name)
		}
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
	sent, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	var res wire.ReadResult
	if err := hostCall(c, path, "files.read", wire.PathParams{Path: sent, MaxBytes: maxBytes}, &res); err != nil {
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
	sent, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	var res wire.ValidateResult
	if err := hostCall(c, path, "files.validate", wire.PathParams{Path: sent}, &res); err != nil {
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
	modes := wire.ModesOwner
	var keep bool
	err := bind(c, 2, req("archive", str(&archive)), req("dest", str(&dest)),
		opt("modes", str(&modes)), opt("keep_archive", boolean(&keep)))
	if err != nil {
		return nil, err
	}
	// Checked here to name the arguments: the daemon's refusal of an empty
	// one names its protocol fields (archivePath, destDir). A dest it
	// refuses otherwise (/) fails with its own words, as the contract has
	// every success:false do.
	switch {
	case archive == "":
		return nil, c.Errorf("archive: want the path of a .tar.gz on the host, got \"\"")
	case dest == "":
		return nil, c.Errorf("dest: want a directory on the host, got \"\"")
	case modes != wire.ModesOwner && modes != wire.ModesArchive:
		return nil, c.Errorf("modes: want %q or %q, got %q", wire.ModesOwner, wire.ModesArchive, modes)
	case !filepath.IsAbs(dest) && !c.Host.Local():
		return nil, c.Errorf("dest: %q is relative and host %s is remote: give an absolute path "+
			"(relative paths are taken from the recipe's directory only on a local host)", dest, c.Host.Target())
	}
	if c.Rejoining && !keep {
		// The daemon may have consumed the archive: extracting again
		// could not (durablelive.go). With keep_archive=True it writes
		// the same files again.
		return nil, c.StopResume(fmt.Sprintf("the runner died in extract_tar(%q) on %s, which may have extracted "+
			"and removed the archive: a resume cannot tell (keep_archive=True makes it safe to extract again)",
			archive, c.Host.Target()))
	}
	sentArchive, err := hostPath(c, archive)
	if err != nil {
		return nil, err
	}
	sentDest, err := hostPath(c, dest)
	if err != nil {
		return nil, err
	}
	params := wire.ExtractParams{PathParams: wire.PathParams{ArchivePath: sentArchive, DestDir: sentDest}}
	if modes == wire.ModesArchive || keep {
		// A daemon without the extension would ignore these params,
		// consume the archive and give owner-only modes: it is not asked.
		if err := requireFeature(c, wire.FeatureExtractOptions, extractAsked(modes, keep)); err != nil {
			return nil, err
		}
		if modes == wire.ModesArchive {
			params.Modes = modes
		}
		params.KeepArchive = keep
	}
	var res wire.ExtractResult
	if err := hostCall(c, archive, "files.extract_tar", params, &res); err != nil {
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

// extractAsked names what an extract_tar call asked of the extension.
func extractAsked(modes string, keep bool) string {
	switch {
	case modes == wire.ModesArchive && keep:
		return `modes="archive" and keep_archive=True`
	case keep:
		return "keep_archive=True"
	}
	return `modes="archive"`
}

// requireFeature fails the call, naming the extension, when its host does
// not advertise it.
func requireFeature(c *runtime.Call, feature, what string) error {
	ok, err := hostHasFeature(c, feature)
	if err != nil {
		return err
	}
	if !ok {
		return c.Errorf("%s needs the daemon extension %q, which host %s does not advertise "+
			"(upgrade its daemon, or use the embedded one)", what, feature, c.Host.Target())
	}
	return nil
}
