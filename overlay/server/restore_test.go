package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestRestoreFromSnapshotBackup restores a server from a backup: a copy of
// its latest raft snapshot directory in an empty data_dir, plus a
// peers.json naming the new cluster. The restored server leads alone and
// holds every write the snapshot had.
func TestRestoreFromSnapshotBackup(t *testing.T) {
	dir := t.TempDir()
	srv := startOn(t, dir)
	srv.Shutdown()
	storeWithState(t, dir)
	srv = startOn(t, dir)
	if err := srv.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	srv.Shutdown()

	// The backup: the newest snapshot directory, copied as is.
	snaps, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*"))
	if len(snaps) == 0 {
		t.Fatal("precondition: no snapshot written")
	}
	latest := snaps[len(snaps)-1]
	restored := t.TempDir()
	if err := os.MkdirAll(filepath.Join(restored, "raft", "snapshots"), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", latest, filepath.Join(restored, "raft", "snapshots")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	raftPort := freePort(t)
	peers := fmt.Sprintf(`[{"id": "restored-1", "address": "127.0.0.1:%d", "non_voter": false}]`, raftPort)
	if err := os.WriteFile(filepath.Join(restored, "raft", "peers.json"), []byte(peers), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: "someone-else", DataDir: restored, BootstrapExpect: 1, Token: testToken, Raft: fastRaft(),
		ReconcileInterval: time.Hour, HTTPListener: listenOn(t, freePort(t)), RaftListener: listenOn(t, raftPort),
		Logger: hclog.New(&hclog.LoggerOptions{Name: "restored", Level: hclog.Off})}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "does not list this server's ID") {
		t.Fatalf("peers.json without this server: %v", err)
	}
	cfg.NodeID = "restored-1"
	cfg.HTTPListener, cfg.RaftListener = listenOn(t, freePort(t)), listenOn(t, raftPort)
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	defer r.Shutdown()
	waitFor(t, 20*time.Second, "the restored server to lead", func() error {
		_, err := r.leaderHTTP()
		return err
	})
	if err := r.Raft().Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if got := usage(r, "ai2/nlp"); got != 40*8*60 {
		t.Fatalf("restored usage %d, want %d", got, 40*8*60)
	}
	if b := r.FSM().Read().Budgets(); b == nil || b.Revision != damageRevision {
		t.Fatalf("restored budgets %+v", b)
	}
	if _, err := os.Stat(filepath.Join(restored, "raft", "peers.json.applied")); err != nil {
		t.Fatalf("peers.json not marked applied: %v", err)
	}
}
