package rules

import (
	"net/url"
	"strings"
)

// domainMatch handles "domain:example.com" for url inputs.
func domainMatch(content, raw string) bool {
	d, ok := strings.CutPrefix(content, "domain:")
	if !ok || d == "" {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	d = strings.ToLower(d)
	return host == d || strings.HasSuffix(host, "."+d)
}
