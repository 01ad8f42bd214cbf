package main

import (
	"github.com/seed5ad92d46/sous/runtime/notify"
)

// notifyOptions checks the --notify URLs (http or https; anything else
// is a usage error before the run starts) and --notify-timeout.
func notifyOptions(opts *RunOptions) (notify.Options, error) {
	if opts.NotifyTimeout <= 0 {
		return notify.Options{}, usageErrorf("--notify-timeout %s: want more than 0", opts.NotifyTimeout)
	}
	for _, u := range opts.Notify {
		if _, err := notify.ParseURL(u); err != nil {
			return notify.Options{}, usageErrorf("--notify %v", err)
		}
	}
	agent := "sous"
	if v := currentBuild().Version; v != "" {
		agent += "/" + v
	}
	return notify.Options{URLs: opts.Notify, Timeout: opts.NotifyTimeout, UserAgent: agent}, nil
}
