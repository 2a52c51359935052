package ui_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/ui/uitest"
)

const token = "ui-test-token"

// seeded starts a -dev server on a loopback port with the uitest cluster.
func seeded(t *testing.T, now time.Time) *server.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &uitest.Reconciler{}
	s, err := server.New(server.Config{Dev: true, Token: token, HTTPListener: ln, ReconcileInterval: time.Hour,
		Reconciler: rec, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	cl, _ := client.New(s.HTTPAddr(), "", nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := cl.Budgets(context.Background(), false); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the dev server to lead")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := uitest.Seed(context.Background(), s, rec, token, now); err != nil {
		t.Fatal(err)
	}
	return s
}

// browser is one headless Chromium tab that records console errors and
// uncaught exceptions.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
	shots  string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	ctx, shots := uitest.Browser(t, 1400, 1000, 3*time.Minute)
	b := &browser{ctx: ctx, shots: shots}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, m.String()+" ("+m.URL+")")
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// open loads url and waits until the UI says the page is ready.
func (b *browser) open(t *testing.T, url, page string) float64 {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
	ms, err := chromedp.Run(b.ctx, chromedp.Poll[float64](fmt.Sprintf(`window.allotReady && window.allotReady.page === %q && window.allotReady.ms`, page),
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("waiting for %s: %v", url, err)
	}
	return ms
}

// waitReady waits for the page mounted by a link or a filter.
func (b *browser) waitReady(t *testing.T, page string) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](fmt.Sprintf(`!!(window.allotReady && window.allotReady.page === %q)`, page),
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("waiting for page %s: %v", page, err)
	}
}

// eval runs js in the page and decodes its value.
func eval[T any](t *testing.T, b *browser, js string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// poll waits until js is truthy and returns its value.
func poll[T any](b *browser, js string) (T, error) {
	return chromedp.Run(b.ctx, chromedp.Poll[T](js, chromedp.WithPollingTimeout(10*time.Second)))
}

func (b *browser) click(t *testing.T, sel string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}

func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	return eval[string](t, b, fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel))
}

func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d KB)", path, len(png)/1024)
}

func (b *browser) noErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("browser: %s", e)
	}
	b.errors = nil
}

// inkedPixels counts the pixels of the n-th chart canvas that differ from
// the background: a chart that drew nothing but axes has few.
const inkedPixels = `(() => {
  const cs = document.querySelectorAll('.chart canvas'); const c = cs[%d]; if (!c) return -1;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i+3] > 0 && (d[i] < 200 || d[i+1] < 200 || d[i+2] < 200)) n++;
  return n; })()`

// chromedpReload leaves the page, so that the next open is a fresh load.
func chromedpReload(b *browser) error {
	return chromedp.Do(b.ctx, chromedp.Navigate("about:blank"))
}

// accessible checks what a screen reader or keyboard user needs of the
// page: every form control has a label, every button a name, every chart a
// label, every table column a header, and the document a language.
func (b *browser) accessible(t *testing.T) {
	t.Helper()
	problems := eval[[]string](t, b, `(() => { const out = [];
  if (!document.documentElement.lang) out.push('no lang on <html>');
  for (const el of document.querySelectorAll('input:not([type=hidden]), select')) {
    if (!el.labels || !el.labels.length) out.push('unlabelled ' + el.tagName + '#' + el.id); }
  for (const el of document.querySelectorAll('button')) if (!el.textContent.trim() && !el.getAttribute('aria-label')) out.push('button without a name');
  for (const el of document.querySelectorAll('.uplot')) if (!el.getAttribute('aria-label')) out.push('chart without a label');
  for (const tb of document.querySelectorAll('main table:not(.u-legend)')) if (!tb.querySelector('thead th')) out.push('table without headers');
  return out; })()`)
	for _, p := range problems {
		t.Errorf("accessibility: %s", p)
	}
}
