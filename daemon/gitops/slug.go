package gitops

import "strings"

// ParseRepoSlug returns the "owner/repo" named by a git remote URL, or "" when
// the URL does not name exactly one owner and one repository.
//
// Accepted forms:
//
//	git@github.com:owner/repo.git            scp-like, user optional
//	[git@host:22]:owner/repo                 scp-like with a bracketed host
//	https://github.com/owner/repo            any scheme://, e.g. ssh, git, http
//	https://user:pw@host:8443/owner/repo/    userinfo, port, trailing slash
//
// Exactly one trailing ".git" is stripped (after trailing slashes), and the
// path after the host must have exactly two non-empty segments, so a GitLab
// subgroup (host/group/sub/proj) yields "". Characters are kept verbatim:
// no case folding and no percent-decoding. Local paths, file:// URLs and other
// host-less forms yield "" because they have no owner. The result is always
// a substring of url.
func ParseRepoSlug(url string) string {
	u := strings.TrimSpace(url)
	path, ok := schemePath(u)
	if !ok {
		path, ok = scpPath(u)
	}
	if !ok {
		return ""
	}
	path = strings.TrimRight(path, "/")
	path = strings.TrimSuffix(path, ".git")
	owner, name, ok := strings.Cut(path, "/")
	if !ok || strings.Contains(name, "/") || !slugSegment(owner) || !slugSegment(name) {
		return ""
	}
	return path
}

// schemePath returns the path of a scheme://authority/path URL, without the
// leading slash and without any query or fragment. ok is false when u is not
// of that form or has no host.
func schemePath(u string) (string, bool) {
	i := strings.Index(u, "://")
	if i <= 0 || !isScheme(u[:i]) {
		return "", false
	}
	rest := u[i+3:]
	// The authority ends at the first slash: RFC 3986 forbids a raw '/' in
	// userinfo, so a password cannot confuse this.
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return "", false
	}
	authority := rest[:slash]
	host := authority[strings.LastIndexByte(authority, '@')+1:]
	if host == "" || host[0] == ':' {
		return "", false // file:///path and friends: no host, so no owner
	}
	path := rest[slash+1:]
	if j := strings.IndexAny(path, "?#"); j >= 0 {
		path = path[:j]
	}
	return path, true
}

// isScheme reports whether s is an RFC 3986 scheme: ALPHA *( ALPHA / DIGIT /
// "+" / "-" / "." ).
func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// scpPath returns the path of an scp-like [user@]host:path address. Like git
// (connect.c), it is scp-like only when a colon comes before the first slash
// and the host is not a single DOS drive letter. The separating colon is the
// first one after the last '@' before that slash, so "user:pw@host:o/r" still
// splits at the host. One leading slash of an absolute path is dropped
// ("git@host:/owner/repo").
func scpPath(u string) (string, bool) {
	if strings.HasPrefix(u, "[") {
		end := strings.IndexByte(u, ']')
		if end < 0 || end+1 >= len(u) || u[end+1] != ':' || end == 1 {
			return "", false
		}
		return strings.TrimPrefix(u[end+2:], "/"), true
	}
	prefix := u
	if slash := strings.IndexByte(u, '/'); slash >= 0 {
		prefix = u[:slash]
	}
	at := strings.LastIndexByte(prefix, '@')
	sep := strings.IndexByte(prefix[at+1:], ':')
	if sep >= 0 {
		sep += at + 1
	} else {
		sep = strings.IndexByte(prefix, ':')
	}
	if sep < 0 {
		return "", false // a local path
	}
	host := prefix[:sep]
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	if host == "" || (sep == 1 && isLetter(u[0])) {
		return "", false // ":path", or a DOS drive "C:\..." / "C:/..."
	}
	return strings.TrimPrefix(u[sep+1:], "/"), true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// slugSegment reports whether s can be an owner or repository name: non-empty,
// not a relative-path step, and free of whitespace and control characters,
// which no hosting service allows and which would only make a confusing slug.
func slugSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
