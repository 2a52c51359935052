package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/ui/uitest"
)

// BenchmarkBudgetsPage1000Leaves measures the server's side of the web UI's
// budgets page on 1,000 leaves with 14 days of minute buckets: the five
// requests the page makes (the root's series over 14 days, the tree, and
// usage over 1, 7 and 14 days), each over loopback HTTP with its JSON
// encoded and read. The figure is ms per page load (ms/page).
func BenchmarkBudgetsPage1000Leaves(b *testing.B) {
	now := time.Now().UTC().Truncate(time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s, err := server.New(server.Config{Dev: true, Token: "bench", HTTPListener: ln, ReconcileInterval: time.Hour,
		Clock: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Shutdown() })
	cl, _ := client.New(s.HTTPAddr(), "bench", nil)
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for _, err := cl.Budgets(ctx, false); err != nil; _, err = cl.Budgets(ctx, false) {
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := uitest.SeedLarge(ctx, cl, now, 10, 10, 10, 14*24*time.Hour); err != nil {
		b.Fatal(err)
	}
	base := "http://" + s.HTTPAddr() + "/v1/"
	page := []string{"usage/series?since=14d", "budgets", "usage?since=1d", "usage?since=7d", "usage?since=14d"}
	get := func(path string) int {
		resp, err := http.Get(base + path)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		n, _ := io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return int(n)
	}
	var bytes int
	for _, p := range page {
		bytes += get(p)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, p := range page {
			get(p)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
	b.ReportMetric(float64(bytes)/1024, "KB/page")
}
