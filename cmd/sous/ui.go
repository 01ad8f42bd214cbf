package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/webui"
)

// uiFlagUsage is the --ui flag's help, shared by run and daemon serve.
const uiFlagUsage = "serve a web page at `ADDR` (HOST:PORT; :PORT is loopback; 127.0.0.1:0 picks a port) and print its URL, with its token, on stderr"

// checkUIAddr validates a --ui value before anything starts.
func checkUIAddr(value string) error {
	if value == "" {
		return nil
	}
	if _, err := webui.ListenAddr(value); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// startDaemonUI serves the daemon's page (sous daemon serve --ui): its
// processes, followed through an in-process client of srv, and the
// pending requests of every run on it, answered in its queue as "remote".
// The page's token is the daemon's. stop ends it.
func startDaemonUI(value string, srv *daemon.Server, token string, stderr io.Writer, logger *slog.Logger) (stop func(), err error) {
	addr, err := webui.ListenAddr(value)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	hub := webui.NewHub("daemon", "daemon", runtime.JSONEvents, nil)
	queue := srv.Approvals()
	page, err := webui.Listen(addr, token, hub, webui.QueueAnswer(queue))
	if err != nil {
		return nil, err
	}
	own := client.Embedded(srv)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		feed := &webui.DaemonFeed{Hub: hub, Client: own}
		if err := feed.Run(ctx); err != nil {
			logger.Error(fmt.Sprintf("[Server] ui: following processes: %v", err))
		}
	}()
	go webui.WatchQueue(ctx, hub, queue)
	fmt.Fprintf(stderr, "sous: ui at %s\n", page.URL())
	return func() {
		cancel()
		page.Close()
		own.Close()
	}, nil
}
