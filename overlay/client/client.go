package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultAddress is where `allot server` listens by default. Port 4650 sits
// next to Nomad's 4646-4648 without clashing.
const DefaultAddress = "http://127.0.0.1:4650"

// Errors callers branch on.
var (
	// ErrUnreachable: no server answered at the address.
	ErrUnreachable = errors.New("allot server unreachable")
	// ErrUnauthorized: the server refused the token (missing or wrong).
	ErrUnauthorized = errors.New("token refused")
	// ErrNotFound: the thing asked about does not exist.
	ErrNotFound = errors.New("not found")
	// ErrServerCertificate: an https server's certificate failed
	// verification (unknown CA, or issued for another name).
	ErrServerCertificate = errors.New("server certificate not trusted")
)

// APIError is an error answer of the server.
type APIError struct {
	Status  int
	Message string
	kind    error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Unwrap lets errors.Is match ErrUnauthorized and ErrNotFound.
func (e *APIError) Unwrap() error { return e.kind }

// Client calls one allot server. The zero value is not usable; use New.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client for address ("host:port" or a URL; "" means
// DefaultAddress). tlsConf may be nil; it is used for https addresses.
func New(address, token string, tlsConf *tls.Config) (*Client, error) {
	if address == "" {
		address = DefaultAddress
	}
	if !strings.Contains(address, "://") {
		address = "http://" + address
	}
	u, err := url.Parse(address)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("address %q: want host:port, http://host:port or https://host:port", address)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	return &Client{base: u, token: token, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// Address returns the server's base URL.
func (c *Client) Address() string { return c.base.String() }

// Do sends one request to path (escaped, as in a URL): in (when not nil) as
// the JSON body, out (when not nil) decoded from a 2xx answer.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	// path is escaped (callers escape IDs with url.PathEscape): setting it
	// as the unescaped Path would escape it twice, and "default/train"
	// would reach the server as "default%2Ftrain".
	u := *c.base
	escaped := strings.TrimSuffix(u.EscapedPath(), "/") + path
	unescaped, err := url.PathUnescape(escaped)
	if err != nil {
		return fmt.Errorf("request path %q: %w", path, err)
	}
	u.Path, u.RawPath = unescaped, escaped
	u.RawQuery = query.Encode()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return fmt.Errorf("%w at %s: %v (pass the CA that signed it with -ca-cert or ALLOT_CACERT, "+
			"or the name it was issued for with -tls-server-name or ALLOT_TLS_SERVER_NAME)", ErrServerCertificate, c.base, cv.Err)
	}
	if err != nil {
		return fmt.Errorf("%w at %s: %v (is `allot server` running? set -address or ALLOT_ADDR)", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%w at %s: reading the answer: %v", ErrUnreachable, c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding the answer of %s %s: %v", method, path, err)
	}
	return nil
}

func apiError(status int, raw []byte) error {
	var eb ErrorBody
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
		msg = eb.Error
	}
	e := &APIError{Status: status, Message: msg}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.kind = ErrUnauthorized
	case http.StatusNotFound:
		e.kind = ErrNotFound
	}
	return e
}

// readQuery asks for the server's own state (stale) or for the leader's,
// confirmed (consistent): a server answers reads from its own state unless
// asked for ?consistent, and the CLI reads consistently unless -stale.
func readQuery(stale bool) url.Values {
	q := url.Values{}
	if stale {
		q.Set("stale", "")
	} else {
		q.Set("consistent", "")
	}
	return q
}

// Budgets returns the budget tree in force.
func (c *Client) Budgets(ctx context.Context, stale bool) (*Budgets, error) {
	var out Budgets
	return &out, c.Do(ctx, http.MethodGet, "/v1/budgets", readQuery(stale), nil, &out)
}

// ApplyBudgets replaces the budget tree (token required).
func (c *Client) ApplyBudgets(ctx context.Context, b *BudgetsApply) (*WriteResult, error) {
	var out WriteResult
	return &out, c.Do(ctx, http.MethodPut, "/v1/budgets", nil, b, &out)
}

// Queue returns the managed jobs in the last plan's order.
func (c *Client) Queue(ctx context.Context, stale bool) (*Queue, error) {
	var out Queue
	return &out, c.Do(ctx, http.MethodGet, "/v1/queue", readQuery(stale), nil, &out)
}

// Explain says where a job stands and why.
func (c *Client) Explain(ctx context.Context, jobID string, stale bool) (*Explain, error) {
	var out Explain
	return &out, c.Do(ctx, http.MethodGet, "/v1/explain/job/"+url.PathEscape(jobID), readQuery(stale), nil, &out)
}

// Usage reports use per budget over the last since (e.g. "7d", "36h").
func (c *Client) Usage(ctx context.Context, since string, stale bool) (*Usage, error) {
	q := readQuery(stale)
	if since != "" {
		q.Set("since", since)
	}
	var out Usage
	return &out, c.Do(ctx, http.MethodGet, "/v1/usage", q, nil, &out)
}

// Nodes returns node drain states.
func (c *Client) Nodes(ctx context.Context, stale bool) (*Nodes, error) {
	var out Nodes
	return &out, c.Do(ctx, http.MethodGet, "/v1/nodes", readQuery(stale), nil, &out)
}

// Decisions returns up to limit recent decisions (0: the server's default).
func (c *Client) Decisions(ctx context.Context, limit int, stale bool) (*Decisions, error) {
	q := readQuery(stale)
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	var out Decisions
	return &out, c.Do(ctx, http.MethodGet, "/v1/decisions", q, nil, &out)
}

// Peers returns the raft configuration.
func (c *Client) Peers(ctx context.Context) (*Peers, error) {
	var out Peers
	return &out, c.Do(ctx, http.MethodGet, "/v1/operator/raft/peers", readQuery(true), nil, &out)
}

// RemovePeer removes a server from the raft configuration (operator token
// required).
func (c *Client) RemovePeer(ctx context.Context, id string) (*WriteResult, error) {
	var out WriteResult
	return &out, c.Do(ctx, http.MethodDelete, "/v1/operator/raft/peer", url.Values{"id": {id}}, nil, &out)
}

// AppendLedger appends charges and demand (token required).
func (c *Client) AppendLedger(ctx context.Context, l *LedgerAppend) (*LedgerResult, error) {
	var out LedgerResult
	return &out, c.Do(ctx, http.MethodPost, "/v1/ledger", nil, l, &out)
}

// Self says which server answered.
func (c *Client) Self(ctx context.Context) (*Self, error) {
	var out Self
	return &out, c.Do(ctx, http.MethodGet, "/v1/agent/self", nil, nil, &out)
}

// Join asks the cluster to add a server as a voter (token required).
func (c *Client) Join(ctx context.Context, j *JoinRequest) error {
	return c.Do(ctx, http.MethodPut, "/v1/operator/raft/join", nil, j, nil)
}
