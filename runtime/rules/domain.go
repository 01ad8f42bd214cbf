package rules

import (
	"net/url"
	"strings"
)

// "domain:example.com" matches a url on example.com or a subdomain of it.
// Hosts compare without case and without a trailing dot ("Example.COM."
// is example.com). A url whose host cannot be told for sure (Go's parser
// rejects it; no http(s) scheme or host; user info, backslashes, blanks or
// control characters, which other parsers read differently; a host that is
// not plain ASCII) matches every deny or ask domain rule and no allow rule.

// ruleDomain is the domain of "domain:x" content.
func ruleDomain(content string) (string, bool) {
	d, ok := strings.CutPrefix(content, "domain:")
	d = strings.TrimRight(strings.ToLower(strings.TrimSpace(d)), ".")
	return d, ok && d != ""
}

// urlHost is the url's host, lower case and without a trailing dot, when
// it can be told for sure.
func urlHost(raw string) (string, bool) {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c == 0x7f || c == '\\' || c >= 0x80 {
			return "", false
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.User != nil {
		return "", false
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "", false
	}
	host := strings.TrimRight(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || isDigit(c) || c == '-' || c == '.' || c == ':') {
			return "", false // a percent-decoded oddity: other parsers differ
		}
	}
	return host, true
}

func onDomain(host, d string) bool {
	return host == d || strings.HasSuffix(host, "."+d)
}

// allowsURL: an allow rule matches a url whose host is sure and on the
// domain.
func allowsURL(content, raw string) bool {
	d, ok := ruleDomain(content)
	if !ok {
		return false
	}
	host, ok := urlHost(raw)
	return ok && onDomain(host, d)
}

// deniesURL: a deny or ask rule matches a url on the domain, or one whose
// host is not sure.
func deniesURL(content, raw string) bool {
	d, ok := ruleDomain(content)
	if !ok {
		return false
	}
	host, ok := urlHost(raw)
	return !ok || onDomain(host, d)
}
