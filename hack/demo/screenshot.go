package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshot saves fleet-api's dashboard, as the demo's editor of the set sees it once the chart
// release is delivered (every member, the chart release Ready on each), to path: README's
// docs/images/fleet-api.png is `hack/demo.sh -screenshot docs/images/fleet-api.png`. It drives
// headless Chromium ($CHROMIUM, or one on PATH: hack/install-chromium.sh installs Debian's).
func (a *fleetAPI) screenshot(ctx context.Context, path string) error {
	browser, err := chromium()
	if err != nil {
		return err
	}
	// A TMPDIR of its own, removed after it: Chromium leaves its profile's lock there when it is
	// stopped rather than exits by itself.
	tmp, err := os.MkdirTemp("", "demo-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 800), chromedp.Env("TMPDIR="+tmp))...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	stepCtx, cancel := context.WithTimeout(tab, 60*time.Second)
	defer cancel()
	// Every member's caches current, the chart release shown, and every Release's rollout drawn:
	// what a user of the demo sees.
	if err := chromedp.Do(stepCtx,
		chromedp.Navigate(a.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), a.editor),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('tr[data-member] .cache-Synced').length === 3 && `+
			`document.querySelector('tr[data-release$="/greeter"]') !== null && `+
			`[...document.querySelectorAll('tr.rollout-row')].every((r) => r.querySelector('.wave') !== null)`, chromedp.WithPollingTimeout(60*time.Second)),
	); err != nil {
		return fmt.Errorf("the dashboard in %s: %w", browser, err)
	}
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		return err
	}
	fmt.Printf("The dashboard, as the set's editor sees it: %s\n", path)
	return nil
}

// chromium is the headless browser to drive: $CHROMIUM, or one on PATH.
func chromium() (string, error) {
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-headless-shell", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("-screenshot needs Chromium: run hack/install-chromium.sh (it installs Debian's chromium package as root), or set CHROMIUM to a browser's path")
}
