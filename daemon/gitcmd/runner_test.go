package gitcmd

import "testing"

func TestOneLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"On branch main\nnothing to commit, working tree clean\n", "nothing to commit, working tree clean"},
		{"hint: x\nfatal: bad revision 'nope'\n", "fatal: bad revision 'nope'"},
		{"error: The following untracked working tree files would be overwritten by merge:\n\t.env\n\tb.txt\nPlease move or remove them before you merge.\nAborting\n",
			"error: The following untracked working tree files would be overwritten by merge: .env, b.txt"},
		{"", ""},
	} {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
