// Package notify posts a run's notifications (sous run --notify URL): a
// JSON object per event that a person may want to hear of away from the
// terminal, a request waiting for an answer and the end of the run.
//
// Sending never holds the run up. Send only queues: each URL has a worker
// goroutine and a bounded queue, and a payload that finds the queue full is
// dropped and counted. Each POST has a timeout. When the run ends, Close
// waits a bounded time for what is queued (the end notification above all)
// and then gives up on the rest, so a server that never answers delays the
// exit by at most that time, and an unreachable one not at all.
package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout = 5 * time.Second
	DefaultQueue   = 64
)

// Options configure a Notifier.
type Options struct {
	// URLs are where each notification is POSTed (http or https).
	URLs []string
	// Timeout bounds each POST, and how long Close waits (0:
	// DefaultTimeout).
	Timeout time.Duration
	// Queue is how many notifications wait for each URL at most (0:
	// DefaultQueue); more are dropped.
	Queue int
	// UserAgent is the requests' User-Agent ("" : "sous").
	UserAgent string
}

// Notifier sends notifications to its URLs in the background.
type Notifier struct {
	timeout   time.Duration
	userAgent string
	client    *http.Client
	targets   []*target
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu     sync.RWMutex
	closed bool
}

// target is one URL, its queue and what became of its notifications.
type target struct {
	url   *url.URL
	queue chan []byte

	mu                    sync.Mutex
	sent, failed, dropped int
	lastErr               error
}

// ParseURL checks a --notify URL: absolute http or https, with a host.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", raw, unwrapURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q: want an http:// or https:// URL", raw)
	}
	return u, nil
}

// New starts a notifier's workers; Close stops them.
func New(opt Options) (*Notifier, error) {
	n := &Notifier{timeout: opt.Timeout, userAgent: opt.UserAgent}
	if n.timeout <= 0 {
		n.timeout = DefaultTimeout
	}
	if n.userAgent == "" {
		n.userAgent = "sous"
	}
	queue := opt.Queue
	if queue <= 0 {
		queue = DefaultQueue
	}
	for _, raw := range opt.URLs {
		u, err := ParseURL(raw)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, &target{url: u, queue: make(chan []byte, queue)})
	}
	n.client = &http.Client{CheckRedirect: checkRedirect}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	for _, t := range n.targets {
		n.wg.Add(1)
		go n.work(t)
	}
	return n, nil
}

// checkRedirect follows a redirect only where a POST stays what it was
// and where it was meant to go: 307 or 308 (301, 302 and 303 turn it into
// a GET without the payload) to the same host, not from https to http. A
// webhook URL often carries its secret in its path; the payload must not
// follow a redirect to someone else.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case req.Response != nil && req.Response.StatusCode != http.StatusTemporaryRedirect &&
		req.Response.StatusCode != http.StatusPermanentRedirect:
		return fmt.Errorf("redirect (HTTP %d) not followed: only 307 and 308 keep the POST", req.Response.StatusCode)
	case req.URL.Host != first.Host:
		return fmt.Errorf("redirect to another host (%s) not followed", req.URL.Host)
	case first.Scheme == "https" && req.URL.Scheme != "https":
		return errors.New("redirect from https to http not followed")
	case len(via) >= 5:
		return errors.New("more than 5 redirects")
	}
	return nil
}

// Send queues payload (a JSON object) for every URL. It never blocks: a
// URL whose queue is full drops it, and Close reports the drop.
func (n *Notifier) Send(payload []byte) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return
	}
	for _, t := range n.targets {
		select {
		case t.queue <- payload:
		default:
			t.mu.Lock()
			t.dropped++
			t.mu.Unlock()
		}
	}
}

// work posts a URL's notifications one after another, in the order they
// were sent, until Close.
func (n *Notifier) work(t *target) {
	defer n.wg.Done()
	for payload := range t.queue {
		err := n.post(t.url, payload)
		t.mu.Lock()
		if err != nil {
			t.failed++
			t.lastErr = err
		} else {
			t.sent++
		}
		t.mu.Unlock()
	}
}

// post sends one notification; any answer but a 2xx is a failure.
func (n *Notifier) post(u *url.URL, payload []byte) error {
	ctx, cancel := context.WithTimeout(n.ctx, n.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", n.userAgent)
	resp, err := n.client.Do(req)
	if err != nil {
		if n.ctx.Err() != nil {
			return errors.New("not sent before sous exited")
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no answer within %s", n.timeout)
		}
		return unwrapURLError(err)
	}
	// Read a little of the body so the connection can be reused; a
	// webhook's answer is not for sous.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	return nil
}

// unwrapURLError drops the *url.Error wrapping, whose message repeats the
// whole URL: a webhook's URL often carries its secret.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Report is what became of one URL's notifications.
type Report struct {
	// URL is the URL without its path, query and credentials: where the
	// notifications went, safe to print.
	URL string
	// Sent were answered with a 2xx; Failed were not (LastErr says why
	// the last one failed), including those still queued when Close gave
	// up; Dropped found the queue full.
	Sent, Failed, Dropped int
	LastErr               error
}

// OK says every notification reached the URL.
func (r Report) OK() bool { return r.Failed == 0 && r.Dropped == 0 }

// Close stops taking notifications, waits up to the timeout for the
// queued ones to be sent, gives up on the rest, and reports, per URL, what
// became of them. Call it once.
func (n *Notifier) Close() []Report {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	for _, t := range n.targets {
		close(t.queue)
	}
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(n.timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		// The POSTs in flight end at once, and the workers count what
		// is left in their queues as failed without sending it.
		n.cancel()
		<-done
	}
	n.cancel()
	reports := make([]Report, 0, len(n.targets))
	for _, t := range n.targets {
		t.mu.Lock()
		reports = append(reports, Report{URL: t.url.Scheme + "://" + t.url.Host, Sent: t.sent, Failed: t.failed,
			Dropped: t.dropped, LastErr: t.lastErr})
		t.mu.Unlock()
	}
	return reports
}
