package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
)

const cliToken = "cli-test-token"

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// devServer starts an in-process -dev server from cfg (Dev, Token, the
// listener and an hour-long ReconcileInterval are filled in), stops it when
// the test ends, and waits until it leads.
func devServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dev, cfg.Token, cfg.HTTPListener, cfg.ReconcileInterval = true, cliToken, ln, time.Hour
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	cl, _ := client.New(s.HTTPAddr(), "", nil)
	waitUntil(t, "the dev server to lead", func() bool {
		_, err := cl.Budgets(context.Background(), false)
		return err == nil
	})
	return s
}

// devAPI starts an in-process -dev server and returns its address.
func devAPI(t *testing.T) string {
	t.Helper()
	return devServer(t, server.Config{}).HTTPAddr()
}

func TestCLIAgainstDevServer(t *testing.T) {
	addr := devAPI(t)
	t.Setenv("ALLOT_ADDR", addr)
	examples := filepath.Join("..", "..", "examples", "budgets")

	code, _, errOut := runCLI(t, "budgets", "apply", examples)
	if code != exitInvalid || !strings.Contains(errOut, "token is required") {
		t.Fatalf("apply without token: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "budgets", "apply", "-token", "wrong", examples)
	if code != exitInvalid || !strings.Contains(errOut, "token refused") || !strings.Contains(errOut, "ALLOT_TOKEN") {
		t.Fatalf("apply with wrong token: %d %q", code, errOut)
	}
	code, out, errOut := runCLI(t, "budgets", "apply", "--token", cliToken, "-revision", "abc123", examples)
	if code != exitOK || !strings.Contains(out, "Applied budget tree abc123") {
		t.Fatalf("apply: %d %q %q", code, out, errOut)
	}
	t.Setenv("ALLOT_TOKEN", cliToken)
	code, out, _ = runCLI(t, "budgets", "apply", "-json", examples)
	if code != exitOK || !strings.Contains(out, `"index"`) {
		t.Fatalf("apply -json with ALLOT_TOKEN: %d %q", code, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usage", "-since", "1d"}, "ai2/nlp"},
		{[]string{"usage", "--json"}, `"owed_gpu_hours"`},
		{[]string{"queue"}, "No managed jobs"},
		{[]string{"queue", "-json"}, `"jobs": []`},
		{[]string{"nodes", "-stale"}, "No GPU nodes"},
		{[]string{"nodes", "--json"}, `"nodes": []`},
		{[]string{"operator", "raft", "list-peers"}, "leader"},
		{[]string{"operator", "raft", "list-peers", "-json"}, `"leader": true`},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != exitOK || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %d %q %q, want output containing %q", tc.args, code, out, errOut, tc.want)
		}
	}
	code, _, errOut = runCLI(t, "explain", "job", "default/ghost")
	if code != exitInvalid || !strings.Contains(errOut, "not managed by allot") {
		t.Errorf("explain unknown job: %d %q", code, errOut)
	}
}

func TestCLIUsageAndConnectionErrors(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"queue", "-address", dead}, exitInvalid, "unreachable"},
		{[]string{"usage", "-since", "forever"}, exitUsage, "-since"},
		{[]string{"explain", "job"}, exitUsage, "exactly one job ID"},
		{[]string{"queue", "extra"}, exitUsage, "no arguments"},
		{[]string{"budgets", "apply"}, exitUsage, "exactly one budget directory"},
		{[]string{"server"}, exitUsage, "-config FILE"},
		{[]string{"operator"}, exitUsage, "raft list-peers"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != tc.wantCode || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %q, want %d containing %q", tc.args, code, errOut, tc.wantCode, tc.want)
		}
	}
}

func TestServerCommandConfigErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.hcl")
	if err := os.WriteFile(path, []byte("data_dir = \"/tmp/x\"\nports {\n  htp = 1\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "server", "-config", path)
	if code != exitInvalid || !strings.Contains(errOut, "server.hcl:3:3") {
		t.Fatalf("bad config: %d %q", code, errOut)
	}
}

// TestServerCommandDev runs `allot server -dev` until its context ends.
func TestServerCommandDev(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"allot", "server", "-dev", "-http-port", strconv.Itoa(port), "-token", cliToken,
			"-operator-token", "op-token", "-log-level", "error"}, &out, &errb)
	}()
	cl, _ := client.New("127.0.0.1:"+strconv.Itoa(port), cliToken, nil)
	waitUntil(t, "allot server -dev to answer", func() bool {
		_, err := cl.Budgets(ctx, false)
		return err == nil
	})
	if _, err := cl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "r", Budgets: []client.BudgetSpec{{Path: "a", Share: 1}}}); err != nil {
		t.Fatal(err)
	}
	ps, err := cl.Peers(ctx)
	if err != nil || len(ps.Servers) != 1 || ps.Servers[0].RaftAddr != "in-memory" {
		t.Fatalf("peers of a -dev server: %+v %v, want one, its raft address in-memory", ps, err)
	}
	// The budgets/ledger token (what CI holds) cannot remove a peer; the
	// operator token can ask.
	addr := "127.0.0.1:" + strconv.Itoa(port)
	code, _, errOut := runCLI(t, "operator", "raft", "remove-peer", "-address", addr, "-token", cliToken, "-id", "gone")
	if code != exitInvalid || !strings.Contains(errOut, "operator capability") {
		t.Errorf("remove-peer with the budgets token: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "operator", "raft", "remove-peer", "-address", addr, "-token", "op-token", "-id", "gone")
	if code == exitOK || !strings.Contains(errOut, `no server "gone" in the raft configuration`) {
		t.Errorf("remove-peer of an unknown server with the operator token: %d %q", code, errOut)
	}
	cancel()
	select {
	case code := <-done:
		// The raft line says where raft is: in memory, not the node ID.
		want := "(dev): HTTP API on 127.0.0.1:" + strconv.Itoa(port) + ", raft in memory (one server, nothing kept after exit)\n"
		if code != exitOK || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "raft on") {
			t.Fatalf("server exited %d: %q %q, want %q", code, out.String(), errb.String(), want)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop after its context ended")
	}
	// -dev printed every capability's token (read once the server has
	// exited: out is not safe to read while it writes).
	for _, want := range []string{"write token (export ALLOT_TOKEN=" + cliToken + ")", "operator token (raft join and remove-peer, nodes return): op-token", "reads are open"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-dev output lacks %q:\n%s", want, out.String())
		}
	}
}
