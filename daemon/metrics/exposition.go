package metrics

import (
	"sort"
	"strconv"
	"strings"
)

// contentType is Prometheus' text exposition format, version 0.0.4.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// The metric types a sample declares in its # TYPE line.
const (
	typeCounter = "counter"
	typeGauge   = "gauge"
	typeUntyped = "untyped"
)

// exposition builds one scrape's text: for each metric its # HELP and
// # TYPE lines, then its sample.
type exposition struct {
	buf []byte
}

// sample adds a metric without labels.
func (e *exposition) sample(name, help, typ string, v float64) {
	e.labelled(name, help, typ, nil, v)
}

// labelled adds a metric with labels (written in their names' order).
func (e *exposition) labelled(name, help, typ string, labels map[string]string, v float64) {
	e.buf = append(e.buf, "# HELP "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = append(e.buf, escapeHelp(help)...)
	e.buf = append(e.buf, "\n# TYPE "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, '\n')
	e.buf = append(e.buf, name...)
	if len(labels) > 0 {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		e.buf = append(e.buf, '{')
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, k...)
			e.buf = append(e.buf, `="`...)
			e.buf = append(e.buf, escapeLabel(labels[k])...)
			e.buf = append(e.buf, '"')
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ' ')
	e.buf = strconv.AppendFloat(e.buf, v, 'g', -1, 64)
	e.buf = append(e.buf, '\n')
}

// The format escapes a backslash and a line feed in HELP text, and a
// double quote too in a label value.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
