package server

import (
	"bytes"
	"crypto/subtle"
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
	s.write(mux, "PUT /v1/budgets", "budgets_apply", s.putBudgets)
	s.read(mux, "GET /v1/queue", "queue", s.getQueue)
	s.read(mux, "GET /v1/explain/job/{id...}", "explain", s.getExplain)
	s.read(mux, "GET /v1/usage", "usage", s.getUsage)
	s.read(mux, "GET /v1/nodes", "nodes", s.getNodes)
	s.write(mux, "PUT /v1/nodes/{id}/return", "node_return", s.putNodeReturn)
	s.read(mux, "GET /v1/decisions", "decisions", s.getDecisions)
	s.write(mux, "POST /v1/ledger", "ledger", s.postLedger)
	s.local(mux, "GET /v1/operator/raft/peers", "peers", s.getPeers)
	s.write(mux, "PUT /v1/operator/raft/join", "join", s.putJoin)
	s.local(mux, "GET /v1/agent/self", "self", s.getSelf)
	mux.Handle("GET /v1/metrics", s.instrument("metrics", s.metrics.handler()))
	s.addPath("GET /v1/metrics")
	mux.Handle("/", s.instrument("unknown", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range s.paths {
			if r.URL.Path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(r.URL.Path, p) {
				writeError(w, errorf(http.StatusMethodNotAllowed, "%s does not accept %s", p, r.Method))
				return
			}
		}
		writeError(w, errorf(http.StatusNotFound, "no endpoint %s %s; see the API list in README.md", r.Method, r.URL.Path))
	})))
	tlsConf, err := s.httpTLS()
	if err != nil {
		return err
	}
	s.httpSrv = &http.Server{Handler: mux, TLSConfig: tlsConf, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: s.cfg.Logger.Named("http").StandardLogger(nil)}
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

// read registers a read endpoint: served locally with ?stale (or on the
// leader), forwarded to the leader otherwise.
func (s *Server) read(mux *http.ServeMux, pattern, route string, fn readFn) {
	s.addPath(pattern)
	mux.Handle(pattern, s.instrument(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, stale := r.URL.Query()["stale"]; !stale && !s.IsLeader() {
			s.forward(w, r, nil)
			return
		}
		s.answer(w, r, func() (any, error) { return fn(r, s.fsm.Read()) })
	})))
}

// local registers an endpoint about this server itself, never forwarded.
func (s *Server) local(mux *http.ServeMux, pattern, route string, fn readFn) {
	s.addPath(pattern)
	mux.Handle(pattern, s.instrument(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.answer(w, r, func() (any, error) { return fn(r, s.fsm.Read()) })
	})))
}

// write registers a write endpoint: the token is checked here, before any
// forwarding, and the body is read under the size limit.
func (s *Server) write(mux *http.ServeMux, pattern, route string, fn writeFn) {
	s.addPath(pattern)
	mux.Handle(pattern, s.instrument(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r); err != nil {
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

// authorize compares the request's token with the server's in constant
// time. A server without a token refuses every write.
func (s *Server) authorize(r *http.Request) error {
	if s.cfg.Token == "" {
		return errorf(http.StatusForbidden, "writes are disabled: this server has no token configured (server { token = ... })")
	}
	got := r.Header.Get("X-Allot-Token")
	if auth := r.Header.Get("Authorization"); got == "" && strings.HasPrefix(auth, "Bearer ") {
		got = strings.TrimPrefix(auth, "Bearer ")
	}
	if got == "" {
		return errorf(http.StatusUnauthorized, "a token is required for writes (header Authorization: Bearer TOKEN, or X-Allot-Token)")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) != 1 {
		return errorf(http.StatusForbidden, "token refused: it does not match the server's token")
	}
	return nil
}

// answer runs fn and writes its result or error as JSON.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, fn func() (any, error)) {
	out, err := fn()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("X-Allot-Index", strconv.FormatUint(s.raft.AppliedIndex(), 10))
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
		writeError(w, errorf(http.StatusBadGateway, "forwarding to the leader at %s: %v", addr, err))
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
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
