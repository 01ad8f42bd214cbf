package daemon

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/seed5ad92d46/sous/daemon/fileops"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// files.extract_tar: claustrum's method, with the files.extract_tar.options
// extension (params "modes" and "keepArchive", wire.ExtractOptions) and the
// daemon's limits on what one archive may unpack to.
//
// The limits apply to every call, the extension's or not: they change no
// frame (an archive past them fails as any bad archive does, with
// success:false), and without them a 1 MiB archive could write a GiB.

// Default limits of an extraction (Config.ExtractMaxBytes and
// ExtractMaxRatio, the --extract-max-* flags).
//
// 16 GiB is more than any release or checkout a recipe unpacks, and less
// than the free disk of a typical build host. gzip's deflate cannot expand
// more than about 1032:1, so a ratio near 1000 would refuse nothing; real
// archives (source trees, binaries, logs) expand 2 to 20 times, and 200
// leaves ten times that for very compressible data while holding a maximal
// bomb to a fifth of what it would write. The ratio applies only past the
// first 64 MiB (fileops.RatioFloor), so a small archive of zeros passes.
const (
	DefaultExtractMaxBytes int64   = 16 << 30
	DefaultExtractMaxRatio float64 = 200
)

// extractLimits turns the Config's limits (0: the default, negative: none)
// into fileops'.
func extractLimits(cfg Config) fileops.Limits {
	var lim fileops.Limits
	switch {
	case cfg.ExtractMaxBytes == 0:
		lim.MaxBytes = DefaultExtractMaxBytes
	case cfg.ExtractMaxBytes > 0:
		lim.MaxBytes = cfg.ExtractMaxBytes
	}
	switch {
	case cfg.ExtractMaxRatio == 0:
		lim.MaxRatio = DefaultExtractMaxRatio
	case cfg.ExtractMaxRatio > 0:
		lim.MaxRatio = cfg.ExtractMaxRatio
	}
	return lim
}

func filesExtractTar(_ context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	p, err := decodeParams[wire.PathParams](raw)
	if err != nil {
		return nil, nil, err
	}
	o := fileops.Options{Limits: se.s.extractLimits}
	// The required params are checked first, by fileops, as claustrum
	// orders it; a daemon with the extension disabled ignores its params
	// as claustrum ignores a key it does not know.
	if p.ArchivePath != "" && p.DestDir != "" && se.s.enabled(wire.FeatureExtractOptions) {
		if o, err = extractOptions(raw, o); err != nil {
			return nil, nil, err
		}
	}
	res, err := fileops.Extract(p.ArchivePath, p.DestDir, o)
	return res, nil, err
}

// extractOptions reads the extension's params into o: a mistyped one, or a
// mode other than "owner" and "archive", is -32602.
func extractOptions(raw json.RawMessage, o fileops.Options) (fileops.Options, error) {
	eo, err := decodeParams[wire.ExtractOptions](raw)
	if err != nil {
		return o, err
	}
	switch eo.Modes {
	case "", wire.ModesOwner:
	case wire.ModesArchive:
		o.ArchiveModes = true
	default:
		return o, wire.InvalidParams(fmt.Sprintf("modes: want %q or %q, got %q", wire.ModesOwner, wire.ModesArchive, eo.Modes))
	}
	o.KeepArchive = eo.KeepArchive
	return o, nil
}
