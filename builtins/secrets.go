package builtins

import (
	"errors"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// secretsDoc says what redaction covers, for each builtin that redacts. It
// and redact's Doc are constants, the figures of event.MinSecret written
// out (TestSecretsDocFigures holds them to it): the table is built at
// every start of sous, and formatting them at init and concatenating the
// Doc at every build showed in the start's profile.
const secretsDoc = "From then on the value is replaced by `" + event.Marker + "` in everything sous writes: the echoed " +
	"output of processes (also when a process writes it in two pieces), print, --json, tracebacks and errors, " +
	"the summary, GitHub Actions annotations and step summary, the web page and notifications. Processes still " +
	"get the real value. Values shorter than " + minSecretText + " bytes are not redacted: they would match all over the output."

// minSecretText is event.MinSecret and maxShortSecretText one less, in
// decimal.
const (
	minSecretText      = "4"
	maxShortSecretText = "3"
)

// maxDotenvBytes bounds the .env file dotenv reads: a larger one is not
// a .env file.
const maxDotenvBytes = 1 << 20

func secretsEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "redact", Journal: runtime.JournalPure, Sig: "redact(value)",
			Doc: "Keeps value out of the run's output. " + secretsDoc + " A value of 1 to " +
				maxShortSecretText + " bytes fails; \"\" does nothing.",
			Fn: redact},
		{Name: "dotenv", Journal: runtime.JournalAnswer, Host: true, Sig: "dotenv(path, *, secret=True) -> dict",
			Doc: "The variables of the .env file path, read through the daemon, as a dict of string to string: " +
				"`KEY=value` lines, `export KEY=value`, values in single quotes (as written) or double quotes " +
				"(with \\n \\t \\r \\\" \\\\ \\$ escapes; both may span lines), `#` comments and blank lines; " +
				"nothing is expanded, and a later assignment of a key wins. A line that is none of these fails, " +
				"naming its line. With secret=True every value is redacted (see redact). " + relativePathsDoc,
			Fn: dotenv, Replayed: dotenvReplayed},
	}
}

func redact(c *runtime.Call) (starlark.Value, error) {
	var value string
	if err := bind(c, 1, req("value", str(&value))); err != nil {
		return nil, err
	}
	if value == "" {
		return starlark.None, nil
	}
	if !c.Env.Output.Redact(value) {
		return nil, c.Errorf("a value of %d bytes would match all over the output; a secret has at least %d",
			len(value), event.MinSecret)
	}
	return starlark.None, nil
}

func dotenv(c *runtime.Call) (starlark.Value, error) {
	var path string
	secret := true
	if err := bind(c, 1, req("path", str(&path)), opt("secret", boolean(&secret))); err != nil {
		return nil, err
	}
	sent, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	limit := int64(maxDotenvBytes)
	var res wire.ReadResult
	if err := hostCall(c, path, "files.read", wire.PathParams{Path: sent, MaxBytes: &limit}, &res); err != nil {
		return nil, err
	}
	if !res.Exists {
		return nil, c.Errorf("%s: no such file", path)
	}
	vars, err := parseDotenv(res.Content)
	if err != nil {
		var de *dotenvError
		if errors.As(err, &de) {
			return nil, c.Errorf("%s:%d: %s", path, de.Line, de.Msg)
		}
		return nil, c.Errorf("%s: %v", path, err)
	}
	d := starlark.NewDict(len(vars))
	for _, v := range vars {
		if secret {
			c.Env.Output.Redact(v.Value) // a short value ("1", "dev") stays: see MinSecret
		}
		d.SetKey(starlark.String(v.Key), starlark.String(v.Value))
	}
	return d, nil
}
