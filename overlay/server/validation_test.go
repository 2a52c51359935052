package server

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// Issue 14's bad inputs, each through the public HTTP API of a dev server
// running on the real clock.

func postLedgerJSON(t *testing.T, s *Server, body string) (int, string) {
	t.Helper()
	return rawRequest(t, s, "POST", "/v1/ledger", testToken, strings.NewReader(body))
}

func chargeJSON(alloc, budget string, gpus int64, from, to time.Time) string {
	return fmt.Sprintf(`{"charges":[{"alloc":%q,"budget":%q,"gpus":%d,"from":%q,"to":%q}]}`,
		alloc, budget, gpus, from.Format(time.RFC3339), to.Format(time.RFC3339))
}

func ledgerUsage(s *Server, leaf string, from, to time.Time) int64 {
	var u int64
	s.FSM().WithLedger(func(l *budgets.Ledger) { u = l.Usage(leaf, from, to) })
	return u
}

// TestAPIFutureChargeDoesNotWipeLedger: one charge dated 2036 moved the
// ledger's horizon to 14 days before 2036 on every replica: every earlier
// charge disappeared, and later ones were acknowledged and dropped.
func TestAPIFutureChargeDoesNotWipeLedger(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	base := time.Now().UTC().Truncate(time.Minute).Add(-30 * time.Minute)
	for k := 0; k < 5; k++ {
		from := base.Add(time.Duration(k) * time.Minute)
		if code, body := postLedgerJSON(t, s, chargeJSON("a1", "root/a", 1, from, from.Add(time.Minute))); code != 200 {
			t.Fatalf("charge %d: %d %s", k, code, body)
		}
	}
	future := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	code, body := postLedgerJSON(t, s, chargeJSON("t", "root/a", 1, future, future.Add(time.Minute)))
	if code != 400 || !strings.Contains(body, "charges[0].from 2036-01-01T00:00:00Z is outside [") {
		t.Errorf("2036 charge: %d %s, want 400 naming charges[0].from and the window", code, body)
	}
	code, body = rawRequest(t, s, "POST", "/v1/ledger", testToken, strings.NewReader(fmt.Sprintf(
		`{"demand":[{"budget":"root/a","gpus":1,"from":%q,"to":%q}]}`, future.Format(time.RFC3339), future.Add(time.Minute).Format(time.RFC3339))))
	if code != 400 || !strings.Contains(body, "demand[0].from 2036-01-01T00:00:00Z is outside [") {
		t.Errorf("2036 demand: %d %s, want 400 naming demand[0].from", code, body)
	}
	later := base.Add(5 * time.Minute)
	if code, body := postLedgerJSON(t, s, chargeJSON("a1", "root/a", 1, later, later.Add(time.Minute))); code != 200 || !strings.Contains(body, `"charged_gpu_seconds": 60`) {
		t.Errorf("later charge: %d %s", code, body)
	}
	if got := ledgerUsage(s, "root/a", base.Add(-time.Hour), base.Add(time.Hour)); got != 6*60 {
		t.Fatalf("ledger holds %d GPU-seconds, want %d: acknowledged charges were lost", got, 6*60)
	}
}

func TestAPILedgerBoundsNamed(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	now := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"gpus 2^63-1 used to be skipped silently", chargeJSON("a", "x", math.MaxInt64, now.Add(-time.Minute), now),
			"charges[0].gpus = 9223372036854775807: want 0 to 1048576"},
		{"negative gpus", chargeJSON("a", "x", -1, now.Add(-time.Minute), now), "charges[0].gpus = -1: want 0 to 1048576"},
		{"older than retention", chargeJSON("a", "x", 1, now.Add(-15*24*time.Hour), now), "charges[0].from"},
		{"ends after the leader's clock", chargeJSON("a", "x", 1, now, now.Add(time.Hour)), "charges[0].to"},
		{"ends before it starts", chargeJSON("a", "x", 1, now, now.Add(-time.Minute)), "charges[0]: to"},
		{"no allocation", chargeJSON("", "x", 1, now.Add(-time.Minute), now), "charges[0].alloc is required"},
		{"900 KB allocation ID", chargeJSON(strings.Repeat("z", 900_000), "x", 1, now.Add(-time.Minute), now),
			"charges[0].alloc is 900000 bytes; at most 256 are allowed"},
		{"long budget", chargeJSON("a", strings.Repeat("b", 5000), 1, now.Add(-time.Minute), now), "charges[0].budget is 5000 bytes; at most 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := postLedgerJSON(t, s, tc.body)
			if code != 400 || !strings.Contains(body, tc.want) {
				t.Fatalf("got %d %.300s, want 400 containing %q", code, body, tc.want)
			}
			if len(body) > 2000 {
				t.Fatalf("answer is %d bytes: it echoes the input", len(body))
			}
		})
	}
	if n := len(s.FSM().Read().Allocs()); n != 0 {
		t.Fatalf("%d allocations stored from refused charges", n)
	}
}

func TestAPIBudgetSizesBounded(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	body := `{"revision":"r1","budgets":[{"path":"ai2","share":1,"description":"` + strings.Repeat("d", 7<<20) + `"}]}`
	code, answer := rawRequest(t, s, "PUT", "/v1/budgets", testToken, strings.NewReader(body))
	if code != 400 || !strings.Contains(answer, "budgets[0].description is 7340032 bytes; at most 4096 are allowed") {
		t.Fatalf("7 MiB description: %d %.300s", code, answer)
	}
	if s.FSM().Read().Budgets() != nil {
		t.Fatal("the 7 MiB description was applied")
	}
}

func TestAPISinceOverflowRefused(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	code, body := rawRequest(t, s, "GET", "/v1/usage?since=10000000000d", "", nil)
	if code != 400 || !strings.Contains(body, "since") {
		t.Fatalf("since=10000000000d: %d %s, want 400", code, body)
	}
}

// TestAPILongJobIDNotEchoed: a 900 KB job ID was echoed back whole.
func TestAPILongJobIDNotEchoed(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	code, body := rawRequest(t, s, "GET", "/v1/explain/job/"+strings.Repeat("j", 900_000), "", nil)
	if code/100 != 4 || len(body) > 4000 {
		t.Fatalf("900 KB job ID: %d with a %d-byte answer, want a 4xx that does not echo it", code, len(body))
	}
	code, body = rawRequest(t, s, "GET", "/v1/explain/job/"+strings.Repeat("j", 2000), "", nil)
	if code != 400 || !strings.Contains(body, "job ID is 2000 bytes; at most 256 are allowed") || len(body) > 1000 {
		t.Fatalf("2000-byte job ID: %d %.300s", code, body)
	}
	code, body = rawRequest(t, s, "GET", "/v1/"+strings.Repeat("p", 20000), "", nil)
	if code != 404 || len(body) > 1000 {
		t.Fatalf("20 KB unknown path: %d with a %d-byte answer", code, len(body))
	}
}

// discard drains and closes a response body.
func discard(resp *http.Response) { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close() }
