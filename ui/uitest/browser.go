package uitest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium finds a headless-capable Chromium: ALLOT_CHROMIUM, or Debian's
// chromium on PATH ("" when there is none).
func Chromium() string {
	if p := os.Getenv("ALLOT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser starts headless Chromium with a window of width x height and
// returns a chromedp context bounded by timeout (both ended when the test
// ends) and the folder for screenshots: $ALLOT_UI_ARTIFACTS, or a temporary
// one. It skips the test with a one-line reason when no Chromium is found,
// and fails it when the one found does not start.
func Browser(t *testing.T, width, height int, timeout time.Duration) (context.Context, string) {
	t.Helper()
	bin := Chromium()
	if bin == "" {
		t.Skip("skip: no chromium found (apt-get install -y chromium, or set ALLOT_CHROMIUM)")
	}
	shots := os.Getenv("ALLOT_UI_ARTIFACTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(width, height), chromedp.Flag("headless", "new"), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	return ctx, shots
}
