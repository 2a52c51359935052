package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

var splitTokens = Tokens{Read: "tok-read", Budgets: "tok-budgets", Ledger: "tok-ledger", Operator: "tok-operator"}

// status returns the HTTP status of err (200 for nil).
func status(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	if err != nil {
		return -1
	}
	return http.StatusOK
}

// TestTokenCapabilities: each token does what its capability allows and
// nothing else; the budgets token CI holds cannot change the cluster's
// membership.
func TestTokenCapabilities(t *testing.T) {
	s := devServer(t, Config{Tokens: splitTokens})
	ctx := context.Background()
	as := func(token string) *client.Client {
		cl, err := client.New(s.HTTPAddr(), token, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	// An empty join is a 400 once authorized: nothing is added to the dev
	// server's one-voter configuration.
	join := func(cl *client.Client) error { return cl.Join(ctx, &client.JoinRequest{}) }
	removePeer := func(cl *client.Client) error { _, err := cl.RemovePeer(ctx, "intruder"); return err }
	budgets := func(cl *client.Client) error { _, err := cl.ApplyBudgets(ctx, testBudgets()); return err }
	ledger := func(cl *client.Client) error { _, err := chargeMinute(ctx, cl, 1, "ai2/nlp"); return err }
	read := func(cl *client.Client) error { _, err := cl.Budgets(ctx, true); return err }
	nodeReturn := func(cl *client.Client) error {
		return cl.Do(ctx, http.MethodPut, "/v1/nodes/n1/return", nil, map[string]any{}, nil)
	}
	for _, tc := range []struct {
		token   string
		allowed []string
	}{
		{"", nil},
		{"wrong", nil},
		{"tok-read", []string{"read"}},
		{"tok-budgets", []string{"read", "budgets"}},
		{"tok-ledger", []string{"read", "ledger"}},
		{"tok-operator", []string{"read", "join", "remove-peer", "node-return"}},
	} {
		cl := as(tc.token)
		for _, op := range []struct {
			name string
			do   func(*client.Client) error
		}{{"read", read}, {"budgets", budgets}, {"ledger", ledger}, {"join", join}, {"remove-peer", removePeer}, {"node-return", nodeReturn}} {
			code := status(op.do(cl))
			refused := code == http.StatusUnauthorized || code == http.StatusForbidden
			if want := slices.Contains(tc.allowed, op.name); want == refused {
				t.Errorf("token %q, %s: status %d, want allowed=%v", tc.token, op.name, code, want)
			}
		}
	}
}

// TestNoTokenRefusesWritesOpenReads: without tokens every write is refused
// with a message naming the setting; reads are open.
func TestNoTokenRefusesWritesOpenReads(t *testing.T) {
	s := devServer(t, Config{})
	cl, _ := client.New(s.HTTPAddr(), "anything", nil)
	_, err := cl.ApplyBudgets(context.Background(), testBudgets())
	if status(err) != http.StatusForbidden || !strings.Contains(err.Error(), "budgets_token") {
		t.Fatalf("apply without a budgets token configured: %v", err)
	}
	if _, err := cl.Budgets(context.Background(), true); err != nil {
		t.Fatalf("open read: %v", err)
	}
}

// TestServerWithLostDataDirRejoins: a server whose data_dir was lost comes
// back with a new ID. The leader refuses to add it next to its old ID at the
// same address (which would make a voter that can never vote), the server
// logs what to do, `remove-peer` (operator token only) removes the old ID,
// and the server then joins and receives the state.
func TestServerWithLostDataDirRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("three-server cluster test skipped in -short mode")
	}
	c := newClusterWith(t, 3, fastRaft(), splitTokens, func(i int, nd *node) { nd.logs = &syncBuffer{} })
	ctx := context.Background()
	c.applyBudgets(ctx, splitTokens.Budgets)
	lead := c.leader()
	lost := (lead + 1) % 3
	oldID := c.nodes[lost].srv.ID()
	c.stop(lost)
	c.nodes[lost].dir = t.TempDir() // the disk was replaced
	c.start(lost)
	newID := c.nodes[lost].srv.ID()
	if newID == oldID {
		t.Fatalf("precondition: the server came back with its old ID %s", oldID)
	}
	waitFor(t, 10*time.Second, "the lost server to log why it cannot join", func() error {
		if out := c.nodes[lost].logs.String(); !strings.Contains(out, "remove-peer -id "+oldID) {
			return fmt.Errorf("log so far:\n%s", out)
		}
		return nil
	})
	peers := func() []string {
		f := c.nodes[lead].srv.Raft().GetConfiguration()
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range f.Configuration().Servers {
			ids = append(ids, string(s.ID))
		}
		return ids
	}
	if ids := peers(); len(ids) != 3 || slices.Contains(ids, newID) {
		t.Fatalf("configuration after the refused join: %v, want the 3 original servers", ids)
	}
	if _, err := c.client(lead, splitTokens.Budgets).RemovePeer(ctx, oldID); status(err) != http.StatusForbidden {
		t.Fatalf("remove-peer with the budgets token: %v, want 403", err)
	}
	waitFor(t, 20*time.Second, "remove-peer of an unknown server to answer 404", func() error {
		_, err := c.client(c.leader(), splitTokens.Operator).RemovePeer(ctx, "no-such-server")
		if code := status(err); code == http.StatusServiceUnavailable {
			return err
		} else if code != http.StatusNotFound {
			t.Fatalf("remove-peer of an unknown server: %v, want 404", err)
		}
		return nil
	})
	c.removePeer(splitTokens.Operator, oldID)
	waitFor(t, 20*time.Second, "the server to join under its new ID and catch up", func() error {
		ids := peers()
		if len(ids) != 3 || !slices.Contains(ids, newID) || slices.Contains(ids, oldID) {
			return fmt.Errorf("configuration %v", ids)
		}
		if b := c.nodes[lost].srv.FSM().Read().Budgets(); b == nil {
			return errors.New("no budgets on the rejoined server yet")
		}
		return nil
	})
	// The rejoined server counts toward quorum: with the third one down the
	// cluster still commits.
	other := 3 - lead - lost
	c.stop(other)
	if err := retry503(t, "a charge", func() error {
		_, err := c.client(c.leader(), splitTokens.Ledger).AppendLedger(ctx, &client.LedgerAppend{Charges: []client.Charge{{
			Alloc: "after-rejoin", Budget: "ai2/nlp", GPUs: 1, From: tBase, To: tBase.Add(time.Minute)}}})
		return err
	}); err != nil {
		t.Fatalf("write with the rejoined server as the only follower: %v", err)
	}
}

// TestStableNodeIDRejoinsAfterDataLoss: with node_id configured, a server
// that lost its data_dir comes back under the same ID and address and
// catches up from the leader.
func TestStableNodeIDRejoinsAfterDataLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("three-server cluster test skipped in -short mode")
	}
	c := newClusterWith(t, 3, fastRaft(), Tokens{}, func(i int, nd *node) { nd.nodeID = "srv-" + strconv.Itoa(i) })
	ctx := context.Background()
	c.applyBudgets(ctx, "")
	lead := c.leader()
	lost := (lead + 1) % 3
	c.stop(lost)
	c.nodes[lost].dir = t.TempDir()
	c.start(lost)
	if got := c.nodes[lost].srv.ID(); got != "srv-"+strconv.Itoa(lost) {
		t.Fatalf("ID after data loss: %s", got)
	}
	waitFor(t, 20*time.Second, "the server to catch up", func() error {
		if b := c.nodes[lost].srv.FSM().Read().Budgets(); b == nil {
			return errors.New("no budgets yet")
		}
		return nil
	})
	f := c.nodes[c.leader()].srv.Raft().GetConfiguration()
	if err := f.Error(); err != nil || len(f.Configuration().Servers) != 3 {
		t.Fatalf("configuration: %+v %v", f.Configuration().Servers, err)
	}
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage != raft.Voter {
			t.Fatalf("server %s is not a voter", srv.ID)
		}
	}
}

// TestReadTokenClusterForms: with a read token and no operator token, the
// servers of a bootstrap_expect group still find each other (they read
// their peers' /v1/agent/self with the read token).
func TestReadTokenClusterForms(t *testing.T) {
	if testing.Short() {
		t.Skip("three-server cluster test skipped in -short mode")
	}
	c := newClusterWith(t, 3, fastRaft(), Tokens{Read: "r", Budgets: "b"}, nil)
	c.applyBudgets(context.Background(), "b")
	lead := c.leader()
	if _, err := c.client(lead, "").Budgets(context.Background(), true); status(err) != http.StatusUnauthorized {
		t.Fatalf("anonymous read with a read token set: %v, want 401", err)
	}
}

// A server configured to join a running cluster needs the operator token.
func TestJoinerNeedsOperatorToken(t *testing.T) {
	_, err := New(Config{DataDir: t.TempDir(), RetryJoin: []string{"127.0.0.1:1"}, Tokens: Tokens{Budgets: "b"}})
	if err == nil || !strings.Contains(err.Error(), "operator_token") {
		t.Fatalf("joiner without an operator token: %v", err)
	}
}

// TestDataDirOfAnotherClusterDoesNotJoin: a server removed from its cluster
// and pointed (by mistake) at another cluster's servers does not join it:
// its data_dir names its own cluster.
func TestDataDirOfAnotherClusterDoesNotJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	c := newCluster(t, 3, fastRaft())
	lead := c.leader()
	gone := (lead + 1) % 3
	goneID := c.nodes[gone].srv.ID()
	c.removePeer(testToken, goneID)
	waitFor(t, 10*time.Second, "the removed server to learn it was removed", func() error {
		if c.nodes[gone].srv.inConfiguration() {
			return errors.New("still in its own configuration")
		}
		return nil
	})
	c.stop(gone)
	other := startOn(t, t.TempDir()) // cluster B: one server
	defer other.Shutdown()
	logs := &syncBuffer{}
	nd := c.nodes[gone]
	srv, err := New(Config{DataDir: nd.dir, RetryJoin: []string{other.HTTPAddr()}, RetryInterval: 50 * time.Millisecond,
		Token: testToken, Raft: fastRaft(), ReconcileInterval: time.Hour,
		HTTPListener: listenOn(t, nd.httpPort), RaftListener: listenOn(t, nd.raftPort),
		Logger: hclog.New(&hclog.LoggerOptions{Name: "gone", Level: hclog.Warn, Output: logs})})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	waitFor(t, 10*time.Second, "the server to refuse joining the other cluster", func() error {
		if !strings.Contains(logs.String(), "belongs to cluster") {
			return fmt.Errorf("log so far:\n%s", logs.String())
		}
		return nil
	})
	f := other.Raft().GetConfiguration()
	if err := f.Error(); err != nil || len(f.Configuration().Servers) != 1 {
		t.Fatalf("cluster B's configuration: %+v %v", f.Configuration().Servers, err)
	}
}

// removePeer removes id through the current leader, retrying while
// leadership moves (a 503) as an operator would.
func (c *cluster) removePeer(token, id string) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, "remove-peer "+id, func() error {
		_, err := c.client(c.leader(), token).RemovePeer(context.Background(), id)
		if status(err) == http.StatusServiceUnavailable {
			return err
		}
		if err != nil {
			c.t.Fatalf("remove-peer %s: %v", id, err)
		}
		return nil
	})
}
