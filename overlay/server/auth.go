package server

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// Capability is what a token lets its holder do. Each write endpoint needs
// one; reads need CapRead only when a read token is configured.
type Capability string

const (
	// CapRead: GET endpoints (open unless Tokens.Read is set). Every token
	// of the server also reads.
	CapRead Capability = "read"
	// CapBudgets: PUT /v1/budgets (what CI's `allot budgets apply` holds).
	CapBudgets Capability = "budgets"
	// CapLedger: POST /v1/ledger (charges and demand from outside the
	// leader's own reconcile loop, which needs no token).
	CapLedger Capability = "ledger"
	// CapOperator: raft join and remove-peer, returning a node to service:
	// what changes who is in the cluster and what it drives.
	CapOperator Capability = "operator"
)

// Tokens are the server's tokens, one per capability. The same string may
// be given to several capabilities; an empty one grants nothing (and with
// no budgets, ledger or operator token, those writes are refused).
type Tokens struct {
	// Read, when set, is required for reads (any other token also reads);
	// when empty, reads are open to anyone who reaches the HTTP port.
	Read     string
	Budgets  string
	Ledger   string
	Operator string
}

// granting returns the tokens that grant c.
func (s *Server) granting(c Capability) []string {
	t := s.cfg.Tokens
	var out []string
	add := func(v string) {
		if v != "" {
			out = append(out, v)
		}
	}
	switch c {
	case CapRead:
		add(t.Read)
		add(t.Budgets)
		add(t.Ledger)
		add(t.Operator)
	case CapBudgets:
		add(t.Budgets)
	case CapLedger:
		add(t.Ledger)
	case CapOperator:
		add(t.Operator)
	}
	add(s.cfg.Token) // Config.Token holds every capability
	return out
}

// authorize checks that the request's token grants c, comparing in
// constant time. Reads pass without a token unless a read token is set.
func (s *Server) authorize(r *http.Request, c Capability) error {
	if c == CapRead && s.cfg.Tokens.Read == "" {
		return nil
	}
	want := s.granting(c)
	if len(want) == 0 {
		return errorf(http.StatusForbidden, "writes are disabled for %s: this server has no %s token configured (server { %s_token = ... } or -%s-token)",
			capabilityWhat(c), c, c, c)
	}
	got := r.Header.Get("X-Allot-Token")
	if auth := r.Header.Get("Authorization"); got == "" && strings.HasPrefix(auth, "Bearer ") {
		got = strings.TrimPrefix(auth, "Bearer ")
	}
	if got == "" {
		return errorf(http.StatusUnauthorized, "a token is required for %s (the %s capability; header Authorization: Bearer TOKEN, or X-Allot-Token)", capabilityWhat(c), c)
	}
	ok := 0
	for _, w := range want {
		ok |= subtle.ConstantTimeCompare([]byte(got), []byte(w))
	}
	if ok != 1 {
		return errorf(http.StatusForbidden, "token refused: it does not grant the %s capability (%s needs the server's %s token)", c, capabilityWhat(c), c)
	}
	return nil
}

func capabilityWhat(c Capability) string {
	switch c {
	case CapRead:
		return "reading"
	case CapBudgets:
		return "applying budgets"
	case CapLedger:
		return "appending to the ledger"
	case CapOperator:
		return "operator actions: raft join, remove-peer and node return"
	}
	return fmt.Sprintf("capability %q", string(c))
}
