package view

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view/ansitext"
)

// GitHub is the output for a GitHub Actions job (GITHUB_ACTIONS=true): a
// denial is a ::warning:: line, a failure an ::error file=...,line=...::
// line (the runner turns both into annotations on the run's page and the
// recipe's line), and the summary is appended to $GITHUB_STEP_SUMMARY as
// Markdown. The lines go to stderr, which the runner reads for workflow
// commands as it reads stdout, so that stdout stays the recipe's (and
// --json's).
type GitHub struct {
	Screen Screen
	State  *event.State
	// SummaryPath is $GITHUB_STEP_SUMMARY ("": no step summary).
	SummaryPath string
	// Workspace is $GITHUB_WORKSPACE: a recipe path under it is given
	// relative to it, as annotations want.
	Workspace string
	// Errorf reports a step summary that could not be written.
	Errorf func(format string, args ...any)
}

// Handle implements event.Sink.
func (g *GitHub) Handle(_ time.Time, e event.Event) {
	switch e := e.(type) {
	case *event.Approval:
		if !e.Allow {
			g.line("::warning title=" + escapeProperty("sous: approval denied") + "::" + escapeData(denialText(e)))
		}
	case *event.End:
		if e.Status != "ok" {
			g.line(g.errorLine(e))
		}
		if g.SummaryPath != "" {
			if err := appendFile(g.SummaryPath, Markdown(g.State, g.relative)); err != nil && g.Errorf != nil {
				g.Errorf("sous: GITHUB_STEP_SUMMARY: %v", err)
			}
		}
	}
}

func (g *GitHub) line(s string) { g.Screen.Write(wire.Stderr, []byte(s+"\n")) }

// errorLine is the failure's workflow command:
//
//	::error file=recipes/build.star,line=12,title=sous run failed::sh: make test: ...
func (g *GitHub) errorLine(e *event.End) string {
	var props []string
	if e.File != "" {
		props = append(props, "file="+escapeProperty(g.relative(e.File)))
		if e.Line > 0 {
			props = append(props, fmt.Sprintf("line=%d", e.Line))
			if e.Col > 0 {
				props = append(props, fmt.Sprintf("col=%d", e.Col))
			}
		}
	}
	props = append(props, "title="+escapeProperty("sous run "+e.Status))
	msg := e.Error
	if msg == "" {
		msg = e.Status
	}
	return "::error " + strings.Join(props, ",") + "::" + escapeData(msg)
}

// relative gives a path under the workspace relative to it.
func (g *GitHub) relative(path string) string {
	if g.Workspace == "" || !filepath.IsAbs(path) {
		return path
	}
	if rel, err := filepath.Rel(g.Workspace, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func denialText(a *event.Approval) string {
	s := "deny " + a.Tool
	if a.Summary != "" {
		s += " " + a.Summary
	}
	s += " (by " + a.By
	if a.Message != "" {
		s += ": " + a.Message
	}
	s += ")"
	if a.Session != "" {
		s += " [session " + short(a.Session) + "]"
	}
	return s
}

// escapeData escapes a workflow command's message, as the runner's own
// toolkit does: %, CR and LF.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a workflow command's property value: also : and ,.
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxMarkdownRows bounds the step summary's table (GitHub takes 1 MiB
// of step summary).
const maxMarkdownRows = 500

// Markdown is the run's summary for $GITHUB_STEP_SUMMARY: a heading with
// the outcome, a table of every process and session (status, duration,
// exit code, cost, denials), and the failure with its recipe line and the
// end of the failed process's stderr. rel shows a recipe path.
func Markdown(s *event.State, rel func(string) string) string {
	end := s.End
	if end == nil {
		return ""
	}
	var b strings.Builder
	icon := "✅"
	if end.Status != "ok" {
		icon = "❌"
	}
	fmt.Fprintf(&b, "### %s sous run %s: %s after %s", icon, mdCode(rel(s.Recipe)), end.Status, Duration(s.Ended.Sub(s.Started)))
	if end.ExitCode != 0 {
		fmt.Fprintf(&b, " (exit code %d)", end.ExitCode)
	}
	b.WriteString("\n\n")
	rows := Rows(s)
	if len(rows) > 0 {
		b.WriteString("| | id | status | duration | exit code | cost | denials |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n")
		for i, r := range rows {
			if i == maxMarkdownRows {
				fmt.Fprintf(&b, "| | … and %d more | | | | | |\n", len(rows)-i)
				break
			}
			exit, cost, denials := "", "", ""
			if r.ExitCode != nil {
				exit = fmt.Sprint(*r.ExitCode)
			}
			if r.Kind == "session" {
				cost = Cost(r.Cost)
				denials = fmt.Sprint(r.Denials)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Kind, mdCell(r.ID), mdCell(r.Status),
				Duration(r.Duration), exit, cost, denials)
		}
		fmt.Fprintf(&b, "| **total** | | | %s | | %s | %d |\n\n", Duration(s.Ended.Sub(s.Started)), Cost(s.Cost()), len(s.Denials))
	}
	if len(s.Denials) > 0 {
		b.WriteString("**Denied requests**\n\n")
		for _, d := range s.Denials {
			fmt.Fprintf(&b, "- %s\n", mdCode(denialText(&d)))
		}
		b.WriteString("\n")
	}
	if end.Status != "ok" {
		b.WriteString("**Failure**")
		if end.File != "" && end.Line > 0 {
			fmt.Fprintf(&b, " at %s", mdCode(fmt.Sprintf("%s:%d", rel(end.File), end.Line)))
			if src := strings.TrimSpace(end.Source); src != "" {
				fmt.Fprintf(&b, ": %s", mdCode(src))
			}
		}
		b.WriteString("\n\n")
		if end.Error != "" {
			b.WriteString(mdBlock(end.Error))
		}
		if p := s.LastFailed; p != nil && len(p.StderrTail) > 0 {
			fmt.Fprintf(&b, "stderr of %s (exit code %d), its last lines:\n\n", mdCode(p.ID), p.ExitCode)
			b.WriteString(mdBlock(strings.Join(TailLines(p.StderrTail, 20), "\n")))
		}
	}
	return b.String()
}

// mdCell makes s safe in a table cell: one line, pipes escaped.
func mdCell(s string) string {
	s = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(sanitize(s))
	return s
}

// mdCode is s as inline code, with a fence longer than any run of
// backticks in it.
func mdCode(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ").Replace(sanitize(s))
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + s + pad + fence
}

// mdBlock is s as a fenced code block.
func mdBlock(s string) string {
	s = ansitext.Strip(s)
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + "\n" + strings.TrimRight(s, "\n") + "\n" + fence + "\n\n"
}
