package gitops

import (
	"strings"
	"testing"
)

var slugCases = []struct {
	url, want string
}{
	// scp-like
	{"git@github.com:owner/repo.git", "owner/repo"},
	{"git@github.com:owner/repo", "owner/repo"},
	{"github.com:owner/repo.git", "owner/repo"},
	{"git@github.com:/owner/repo.git", "owner/repo"},
	{"git@github.com:owner/repo.git/", "owner/repo"},
	{"git@github.com:owner/repo/", "owner/repo"},
	{"user:pw@host.example:owner/repo.git", "owner/repo"},
	{"[git@host.example:2222]:owner/repo.git", "owner/repo"},
	{"gh:owner/repo", "owner/repo"}, // an insteadOf alias still names owner/repo
	{"git@gitlab.com:group/sub/proj.git", ""},
	{"git@github.com:repo.git", ""},
	{"git@github.com:", ""},
	{"git@github.com:owner/", ""},
	{":owner/repo", ""},
	{"[]:owner/repo", ""},
	{"[host:owner/repo", ""},

	// schemes
	{"https://github.com/owner/repo", "owner/repo"},
	{"https://github.com/owner/repo.git", "owner/repo"},
	{"https://github.com/owner/repo/", "owner/repo"},
	{"https://github.com/owner/repo.git/", "owner/repo"},
	{"http://github.com/owner/repo", "owner/repo"},
	{"ssh://git@github.com/owner/repo.git", "owner/repo"},
	{"ssh://git@github.com:2222/owner/repo.git", "owner/repo"},
	{"git://github.com/owner/repo.git", "owner/repo"},
	{"git+ssh://git@github.com/owner/repo.git", "owner/repo"},
	{"https://user:pw@github.com/owner/repo", "owner/repo"},
	{"https://user:p@ss@github.com/owner/repo", "owner/repo"},
	{"https://x-access-token:ghp_abc@github.com/owner/repo.git", "owner/repo"},
	{"https://github.com:443/owner/repo", "owner/repo"},
	{"https://[::1]:8080/owner/repo.git", "owner/repo"},
	{"HTTPS://GitHub.com/Owner/Repo", "Owner/Repo"},
	{"https://github.com/owner/repo?ref=x", "owner/repo"},
	{"https://github.com/owner/repo#frag", "owner/repo"},
	{"https://gitlab.com/group/sub/proj.git", ""},
	{"https://gitlab.com/group/sub/proj", ""},
	{"https://github.com/owner", ""},
	{"https://github.com/", ""},
	{"https://github.com", ""},
	{"https://github.com//repo", ""},
	{"https:///owner/repo", ""},
	{"https://user@/owner/repo", ""},
	{"https://:80/owner/repo", ""},
	{"file:///owner/repo", ""},
	{"file:///srv/git/owner/repo.git", ""},
	{"1https://github.com/owner/repo", ""}, // not a scheme, not scp-like either

	// .git stripping: exactly one
	{"https://github.com/owner/repo.git.git", "owner/repo.git"},
	{"https://github.com/owner/.git", ""},
	{"https://github.com/owner/repo/.git", ""},
	{"git@github.com:owner/.git.git", "owner/.git"},

	// characters kept verbatim
	{"git@github.com:My-Org_1/my.repo-name_2.git", "My-Org_1/my.repo-name_2"},
	{"https://github.com/o%20x/r", "o%20x/r"},
	{"git@github.com:owner/repo.GIT", "owner/repo.GIT"},
	{"  git@github.com:owner/repo.git \n", "owner/repo"},

	// not slugs
	{"", ""},
	{"/srv/git/owner/repo.git", ""},
	{"../owner/repo", ""},
	{"owner/repo", ""},
	{"C:/owner/repo", ""},
	{`C:\owner\repo`, ""},
	{"https://github.com/../repo", ""},
	{"https://github.com/./repo", ""},
	{"https://github.com/ow ner/repo", ""},
	{"https://github.com/owner/re\tpo", ""},
}

func TestParseRepoSlug(t *testing.T) {
	t.Parallel()
	for _, c := range slugCases {
		if got := ParseRepoSlug(c.url); got != c.want {
			t.Errorf("ParseRepoSlug(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

// FuzzParseRepoSlug checks the parser's invariants on arbitrary input: it
// never panics, and it returns "" or a substring of its input made of two
// non-empty segments around exactly one slash.
func FuzzParseRepoSlug(f *testing.F) {
	for _, c := range slugCases {
		f.Add(c.url)
	}
	f.Fuzz(func(t *testing.T, url string) {
		got := ParseRepoSlug(url)
		if got == "" {
			return
		}
		if strings.Count(got, "/") != 1 {
			t.Fatalf("ParseRepoSlug(%q) = %q: want exactly one slash", url, got)
		}
		owner, name, _ := strings.Cut(got, "/")
		if owner == "" || name == "" {
			t.Fatalf("ParseRepoSlug(%q) = %q: empty segment", url, got)
		}
		if !strings.Contains(url, got) {
			t.Fatalf("ParseRepoSlug(%q) = %q: not a substring of the input", url, got)
		}
	})
}
