package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivilegedRun: run(privileged=True) asks the approvers first. The
// recipe's policy sees a "privileged" Request for tool "Sudo" with the argv
// and the reason; approved, the command runs as root (directly here, where
// the runner is root; through sudo -n elsewhere); denied, it never starts
// and its status is "denied".
func TestPrivilegedRun(t *testing.T) {
	t.Parallel()
	o, dir := runStar(t, `
seen = []
def policy(req):
    seen.append("%s %s %s %s" % (req.kind, req.tool, req.input["command"], req.input["reason"]))
    if req.input["command"][0] == "id":
        return approve()
    return deny("not on my watch")

approvals(policy)
ok = run("id", ["-u"], privileged=True, reason="needs root", echo=False)
print("approved:", ok.status, ok.stdout.strip())

no = run("touch", [args["dir"] + "/created"], privileged=True, reason="just because", check=False, echo=False)
print("denied:", no.status, no.exit_code, no.stderr.strip())

sh_no = sh("touch " + args["dir"] + "/created2", privileged=True, check=False, echo=False)
p_no = pipeline([["echo", "x"], ["tee", args["dir"] + "/created3"]], privileged=True, check=False, echo=False)
print("sh and pipeline:", sh_no.status, p_no.status)
print("seen:", seen)
run("touch", [args["dir"] + "/created"], privileged=True)
`)
	if os.Geteuid() != 0 {
		// Not root: the approved `id -u` goes through sudo -n, which may
		// not be configured here; the denials are what this test is about.
		if !strings.Contains(o.stderr, "denied: denied") {
			t.Fatalf("stderr:\n%s", o.stderr)
		}
		return
	}
	o.expect(t, 1,
		"approved: ok 0",
		"denied: denied -1 not on my watch",
		"sh and pipeline: denied denied",
		`seen: ["privileged Sudo [\"id\", \"-u\"] needs root", "privileged Sudo [\"touch\", `,
		"denied (status \"denied\")",
	)
	for _, name := range []string{"created", "created2", "created3"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s exists: a denied privileged command ran", name)
		}
	}
}

// An approver's input replaces the command it approved (RECIPES.md: "input
// replaces the tool input"), for run, sh and pipeline.
func TestPrivilegedApproverReplacesCommand(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the approved commands would go through sudo -n")
	}
	o, _ := runStar(t, `
approvals(lambda r: approve(input={"command": ["echo", "replaced"], "reason": r.input["reason"]}))
print(run("echo", ["original"], privileged=True, echo=False).stdout.strip())
print(sh("echo original", privileged=True, echo=False).stdout.strip())
approvals(lambda r: approve(input={"command": ["echo", "ab", "|", "tr", "a", "x"]}))
print(pipeline([["echo", "original"]], privileged=True, echo=False).stdout.strip())
approvals(lambda r: approve(input={"reason": "no command"}))
run("echo", ["original"], privileged=True, echo=False)
`)
	o.expect(t, 1, "run: the approver's input: command: want a non-empty list of strings, got nothing")
	var printed []string
	for _, line := range strings.Split(o.stderr, "\n") {
		if !strings.HasPrefix(line, "approval: ") && !strings.HasPrefix(line, "Traceback") {
			printed = append(printed, line)
		}
	}
	if got := strings.Join(printed[:3], " "); got != "replaced replaced xb" {
		t.Errorf("printed %q, want the replaced commands' output:\n%s", got, o.stderr)
	}
}

// TestPrivilegedDefaultDeny: with no approver and no terminal, a privileged
// command is denied by default, and --allow rules can approve it.
func TestPrivilegedDefaultDeny(t *testing.T) {
	t.Parallel()
	src := `
r = run("id", ["-u"], privileged=True, check=False, echo=False)
print("status:", r.status, r.stdout.strip())
`
	o, _ := runStar(t, src)
	o.expect(t, 0, "status: denied")
	if os.Geteuid() == 0 {
		o, _ = runStar(t, src, "--allow", "Sudo(id:*)")
		o.expect(t, 0, "status: ok 0")
	}
}
