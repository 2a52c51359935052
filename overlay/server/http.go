package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/state"
)

// forwardedHeader marks a request a follower forwarded to the leader, so
// that a request is forwarded at most once.
const forwardedHeader = "X-Allot-Forwarded"

// httpError is an error answer with its status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// readFn answers a GET from a consistent view of the state.
type readFn func(r *http.Request, v *state.View) (any, error)

// writeFn performs a write on the leader with the request's body.
type writeFn func(r *http.Request, body []byte) (any, error)

func (s *Server) startHTTP() error {
	mux := http.NewServeMux()
	s.read(mux, "GET /v1/budgets", "budgets", s.getBudgets)
	s.write(mux, "PUT /v1/budgets", "budgets_apply", CapBudgets, s.putBudgets)
	s.read(mux, "GET /v1/queue", "queue", s.getQueue)
	s.read(mux, "GET /v1/explain/job/{id...}", "explain", s.getExplain)
	s.read(mux, "GET /v1/usage", "usage", s.getUsage)
	s.read(mux, "GET /v1/nodes", "nodes", s.getNodes)
	s.write(mux, "PUT /v1/nodes/{id}/return", "node_return", CapOperator, s.putNodeReturn)
	s.read(mux, "GET /v1/decisions", "decisions", s.getDecisions)
	s.write(mux, "POST /v1/ledger", "ledger", CapLedger, s.postLedger)
	s.local(mux, "GET /v1/operator/raft/peers", "peers", s.getPeers)
	s.write(mux, "PUT /v1/operator/raft/join", "join", CapOperator, s.putJoin)
	s.write(mux, "DELETE /v1/operator/raft/peer", "remove_peer", CapOperator, s.deletePeer)
	s.local(mux, "GET /v1/agent/self", "self", s.getSelf)
	s.read(mux, "GET /v1/usage/series", "usage_series", s.getUsageSeries)
	s.read(mux, "GET /v1/jobs/{id...}", "job_history", s.getJobHistory)
	s.serveUI(mux)
	mux.Handle("GET /v1/metrics", s.instrument("metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, CapRead); err != nil {
			writeError(w, err)
			return
		}
		s.metrics.handler().ServeHTTP(w, r)
	})))
	s.addPath("GET /v1/metrics")
	mux.Handle("/", s.instrument("unknown", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range s.paths {
			if r.URL.Path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(r.URL.Path, p) {
				writeError(w, errorf(http.StatusMethodNotAllowed, "%s does not accept %s", p, r.Method))
				return
			}
		}
		writeError(w, errorf(http.StatusNotFound, "no endpoint %s %s; see the API list in README.md", state.QuotePrefix(r.Method), state.QuotePrefix(r.URL.Path)))
	})))
	tlsConf, err := s.httpTLS()
	if err != nil {
		return err
	}
	s.httpSrv = &http.Server{Handler: mux, TLSConfig: tlsConf, ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout: httpReadTimeout, WriteTimeout: httpWriteTimeout, IdleTimeout: s.cfg.HTTPIdleTimeout,
		MaxHeaderBytes: httpMaxHeaderBytes, ErrorLog: s.cfg.Logger.Named("http").StandardLogger(nil)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		if tlsConf != nil {
			err = s.httpSrv.ServeTLS(s.httpLn, "", "")
		} else {
			err = s.httpSrv.Serve(s.httpLn)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "error", err)
		}
	}()
	return nil
}

// addPath remembers a pattern's path, so that other methods on it get 405.
func (s *Server) addPath(pattern string) {
	_, path, _ := strings.Cut(pattern, " ")
	path, _, _ = strings.Cut(path, "{")
	s.paths = append(s.paths, path)
}

// read registers a read endpoint. Every server answers reads from its own
// state, as Nomad and Consul do with ?stale, and says how fresh it is
// (X-Allot-Index, X-Allot-Known-Leader, X-Allot-Last-Contact): reads cost
// the leader nothing. With ?consistent a follower forwards the read and the
// leader answers once it has confirmed it still leads and has applied
// everything committed. At most MaxConcurrentReads are served at once.
func (s *Server) read(mux *http.ServeMux, pattern, route string, fn readFn) {
	s.addPath(pattern)
	mux.Handle(pattern, s.instrument(route, s.limitReads(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, CapRead); err != nil {
			writeError(w, err)
			return
		}
		q := r.URL.Query()
		_, stale := q["stale"]
		_, consistent := q["consistent"]
		switch {
		case stale && consistent:
			writeError(w, errorf(http.StatusBadRequest, "stale and consistent: ask for one of them (neither: this server's own state)"))
			return
		case consistent && !s.IsLeader():
			s.forward(w, r, nil)
			return
		case consistent:
			if err := s.consistentRead(); err != nil {
				writeError(w, err)
				return
			}
		}
		s.answer(w, r, func() (any, error) { return fn(r, s.fsm.Read()) })
	}))))
}

// local registers an endpoint about this server itself, never forwarded.
func (s *Server) local(mux *http.ServeMux, pattern, route string, fn readFn) {
	s.addPath(pattern)
	mux.Handle(pattern, s.instrument(route, s.limitReads(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, CapRead); err != nil {
			writeError(w, err)
			return
		}
		s.answer(w, r, func() (any, error) { return fn(r, s.fsm.Read()) })
	}))))
}

// limitReads serves at most MaxConcurrentReads reads at once; a read beyond
// them waits (blocked, using no CPU) up to readQueueWait for a slot, then
// gets 429.
func (s *Server) limitReads(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(readQueueWait)
		defer t.Stop()
		select {
		case s.reads <- struct{}{}:
			defer func() { <-s.reads }()
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		case <-t.C:
			w.Header().Set("Retry-After", "1")
			writeError(w, errorf(http.StatusTooManyRequests, "this server is serving %d reads already; retry in a second, or ask another server", cap(s.reads)))
		}
	})
}

// consistentRead confirms on the leader that it still leads (a quorum
// answers) and waits until its state holds everything committed before.
func (s *Server) consistentRead() error {
	commit := s.raft.CommitIndex()
	if err := s.raft.VerifyLeader().Error(); err != nil {
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	deadline := time.Now().Add(applyTimeout)
	for s.raft.AppliedIndex() < commit {
		if time.Now().After(deadline) {
			return errorf(http.StatusServiceUnavailable, "the leader has not applied index %d within %v; retry", commit, applyTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// write registers a write endpoint that needs capability c: the token is
// checked here, before any forwarding, and the body is read under the size
// limit.
func (s *Server) write(mux *http.ServeMux, pattern, route string, c Capability, fn writeFn) {
	s.addPath(pattern)
	mux.Handle(pattern, s.instrument(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, c); err != nil {
			writeError(w, err)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, errorf(http.StatusRequestEntityTooLarge, "request body over %d bytes; split it into smaller requests", tooBig.Limit))
				return
			}
			writeError(w, errorf(http.StatusBadRequest, "reading request body: %v", err))
			return
		}
		if !s.IsLeader() {
			s.forward(w, r, body)
			return
		}
		s.answer(w, r, func() (any, error) { return fn(r, body) })
	})))
}

// answer runs fn and writes its result or error as JSON.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, fn func() (any, error)) {
	out, err := fn()
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	h.Set("X-Allot-Index", strconv.FormatUint(s.raft.AppliedIndex(), 10))
	addr, _ := s.raft.LeaderWithID()
	h.Set("X-Allot-Known-Leader", strconv.FormatBool(addr != ""))
	contact := int64(0)
	if !s.IsLeader() {
		if last := s.raft.LastContact(); last.IsZero() {
			contact = -1
		} else {
			contact = time.Since(last).Milliseconds()
		}
	}
	h.Set("X-Allot-Last-Contact", strconv.FormatInt(contact, 10))
	writeJSON(w, http.StatusOK, out)
}

// forward relays a request to the leader's HTTP API and copies the answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get(forwardedHeader) != "" {
		writeError(w, errorf(http.StatusServiceUnavailable, "forwarded request reached a follower: leadership is changing; retry"))
		return
	}
	addr, err := s.leaderHTTP()
	if err != nil {
		writeError(w, errorf(http.StatusServiceUnavailable, "%v; retry shortly, or read with ?stale", err))
		return
	}
	scheme := "http://"
	if s.cfg.TLS.HTTP {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, scheme+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, err)
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Set(forwardedHeader, s.id)
	resp, err := s.fwd.Do(req)
	if err != nil {
		writeError(w, forwardFailure(r, addr, err))
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// forwardFailure is the 502 of a request the leader did not answer. A write
// may have been applied all the same (the connection can drop after the
// commit and before the answer), and the message says so and how to check.
func forwardFailure(r *http.Request, addr string, err error) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return errorf(http.StatusBadGateway, "forwarding to the leader at %s: %v; retry, or read this server's own state without ?consistent", addr, err)
	}
	check := "the state it changes"
	switch p := r.URL.Path; {
	case p == "/v1/budgets":
		check = "GET /v1/budgets?consistent (the revision in force); applying the same revision again is safe"
	case p == "/v1/ledger":
		check = "GET /v1/usage?consistent; sending the same charges again is safe: a charge already applied counts once"
	case strings.HasPrefix(p, "/v1/nodes/"):
		check = "GET /v1/nodes?consistent"
	case strings.HasPrefix(p, "/v1/operator/raft/"):
		check = "GET /v1/operator/raft/peers"
	}
	return errorf(http.StatusBadGateway, "forwarding %s %s to the leader at %s: %v. The leader may have applied it: check with %s before retrying",
		r.Method, state.QuotePrefix(r.URL.Path), addr, err, check)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if c, ok := v.(compactJSON); ok {
		v = c.v
	} else {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var he *httpError
	switch {
	case errors.As(err, &he):
		status = he.status
	case errors.Is(err, ErrRejected):
		status = http.StatusBadRequest
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader):
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, client.ErrorBody{Error: err.Error()})
}

// decodeBody decodes a JSON body strictly: unknown fields are errors.
func decodeBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "malformed request body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "malformed request body: more than one JSON value")
	}
	return nil
}
