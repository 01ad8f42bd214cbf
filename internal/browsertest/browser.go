// Package browsertest starts a real headless Chromium for tests of the web
// page (webui, sous run --ui), driven with chromedp.
package browsertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Path is where the tests look for Chromium (Debian's chromium package;
// .ci/run installs it).
const Path = "/usr/bin/chromium"

// New starts a headless Chromium with a fresh profile and returns a tab's
// context, closed when the test ends; it skips the test when Chromium is
// not installed. A JavaScript dialog (an alert a page was tricked into)
// fails the test.
func New(tb testing.TB, timeout time.Duration) context.Context {
	tb.Helper()
	if _, err := os.Stat(Path); err != nil {
		tb.Skipf("no Chromium at %s (apt-get install chromium): %v", Path, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tctx, cancelTab := chromedp.NewContext(actx)
	tb.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
	})
	if err := chromedp.Do(tctx); err != nil {
		tb.Fatalf("starting %s: %v", Path, err)
	}
	go func() {
		for ev, err := range chromedp.Events(tctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			tb.Errorf("the page opened a %s dialog: %q", ev.Type, ev.Message)
			chromedp.Call(tctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()
	return tctx
}

// Screenshot saves a PNG of the whole page to the path in
// $SOUS_UI_SCREENSHOT, when it is set.
func Screenshot(tb testing.TB, ctx context.Context) {
	tb.Helper()
	path := os.Getenv("SOUS_UI_SCREENSHOT")
	if path == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("screenshot of the page: %s", path)
}
