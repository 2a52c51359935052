package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// fuzzRoutes are the endpoints FuzzHTTPDecode drives: each decodes a body,
// a query parameter or a path segment.
var fuzzRoutes = []struct{ method, path, param string }{
	{"POST", "/v1/ledger", ""},
	{"PUT", "/v1/budgets", ""},
	{"GET", "/v1/usage", "since"},
	{"GET", "/v1/decisions", "limit"},
	{"GET", "/v1/explain/job/", "path"},
	{"PUT", "/v1/nodes/", "path"},
	{"GET", "/v1/queue", "consistent"},
}

// FuzzHTTPDecode sends arbitrary bodies, query values and path segments to
// the API of one dev server and checks: no panic; no 5xx (every refusal is
// the caller's 4xx, or the mux's redirect of an unclean path); an error
// answer is JSON, short, and never echoes more
// than a prefix of the input; and no input moves the ledger's newest bucket
// past the leader's clock plus the allowed skew.
func FuzzHTTPDecode(f *testing.F) {
	now := time.Now().UTC().Truncate(time.Minute)
	ts := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	f.Add(uint8(0), "", []byte(`{"charges":[{"alloc":"t","budget":"root/a","gpus":1,"from":"2036-01-01T00:00:00Z","to":"2036-01-01T00:01:00Z"}]}`))
	f.Add(uint8(0), "", []byte(`{"charges":[{"alloc":"a","budget":"ai2/nlp","gpus":9223372036854775807,"from":"`+ts(-time.Minute)+`","to":"`+ts(0)+`"}]}`))
	f.Add(uint8(0), "", []byte(`{"demand":[{"budget":"ai2/nlp","gpus":3,"from":"`+ts(-2*time.Minute)+`","to":"`+ts(0)+`"}],"charges":[{"alloc":"b","budget":"ai2/nlp","gpus":2,"from":"`+ts(-time.Hour)+`","to":"`+ts(0)+`"}]}`))
	f.Add(uint8(0), "", []byte(`{"charges":[{"alloc":"c","gpus":1,"from":"-9999-01-01T00:00:00Z","to":"9999-12-31T23:59:59Z"}]}`))
	f.Add(uint8(1), "", []byte(`{"revision":"r1","budgets":[{"path":"ai2","share":1},{"path":"ai2/nlp","share":1,"description":"d","owners":["x"]}]}`))
	f.Add(uint8(1), "", []byte(`{"revision":"","budgets":[{"path":"a","share":-1}]}`))
	f.Add(uint8(2), "10000000000d", []byte(nil))
	f.Add(uint8(2), "-5m", []byte(nil))
	f.Add(uint8(3), "10000", []byte(nil))
	f.Add(uint8(3), "99999999999999999999", []byte(nil))
	f.Add(uint8(4), "default/train", []byte(nil))
	f.Add(uint8(5), "node-1/return", []byte(nil))
	f.Add(uint8(6), "", []byte(nil))
	s := devServer(f, Config{Token: testToken})
	h := s.httpSrv.Handler
	f.Fuzz(func(t *testing.T, route uint8, param string, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		target := rt.path
		switch rt.param {
		case "":
		case "path":
			target += url.PathEscape(param)
		default:
			target += "?" + url.Values{rt.param: {param}}.Encode()
		}
		req := httptest.NewRequest(rt.method, target, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code, answer := rec.Code, rec.Body.Bytes()
		switch {
		case code >= 500:
			t.Fatalf("%s %s: %d %s", rt.method, target, code, answer)
		case code/100 == 3: // the mux's redirect of an unclean path ("/v1/nodes/.")
			if rec.Header().Get("Location") == "" {
				t.Fatalf("%s %s: %d without a Location", rt.method, target, code)
			}
		case code != http.StatusOK:
			var eb struct{ Error string }
			if err := json.Unmarshal(answer, &eb); err != nil || eb.Error == "" {
				t.Fatalf("%s %s: %d answer is not a JSON error: %q", rt.method, target, code, answer)
			}
			if len(answer) > 8192 {
				t.Fatalf("%s %s: %d answer is %d bytes: it echoes the input", rt.method, target, code, len(answer))
			}
		}
		limit := time.Now().Add(s.fsm.Config().MaxSkew + s.fsm.Config().Bucket)
		s.fsm.WithLedger(func(l *budgets.Ledger) {
			if head, ok := l.Head(); ok && head.After(limit) {
				t.Fatalf("%s %s moved the ledger's newest bucket to %v, past the clock's %v", rt.method, target, head, limit)
			}
		})
	})
}
