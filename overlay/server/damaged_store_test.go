package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/hashicorp/go-hclog"
)

// damageRevision is the budget revision written before the damage; the
// "byte changed in a log entry" case alters it on disk.
const damageRevision = "rev-before-damage-7f3a"

// storeWithState starts a server on dir, applies budgets and charges (each
// acknowledged), and stops it cleanly. It returns the ports to reuse.
func storeWithState(t *testing.T, dir string) {
	t.Helper()
	srv := startOn(t, dir)
	cl, err := client.New(srv.HTTPAddr(), testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := testBudgets()
	b.Revision = damageRevision
	if _, err := cl.ApplyBudgets(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 40; k++ {
		if _, err := chargeMinute(context.Background(), cl, k, "ai2/nlp"); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func diskConfig(t *testing.T, dir string) Config {
	return Config{DataDir: dir, BootstrapExpect: 1, Token: testToken, Raft: fastRaft(), ReconcileInterval: time.Hour,
		HTTPListener: listenOn(t, freePort(t)), RaftListener: listenOn(t, freePort(t)),
		Logger: hclog.New(&hclog.LoggerOptions{Name: "damaged", Level: hclog.Off})}
}

func startOn(t *testing.T, dir string) *Server {
	t.Helper()
	srv, err := New(diskConfig(t, dir))
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	waitFor(t, 20*time.Second, "the server to lead and register", func() error {
		_, err := srv.leaderHTTP()
		return err
	})
	// The server's registration is replayed early in the log: wait until
	// everything committed before this term is applied.
	if err := srv.Raft().Barrier(10 * time.Second).Error(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	return srv
}

func pageSizeOf(t *testing.T, db []byte) int {
	ps := int(binary.LittleEndian.Uint32(db[16+8:]))
	if ps < 512 || ps > 1<<16 {
		t.Fatalf("precondition: page size %d in meta page 0", ps)
	}
	return ps
}

// TestDamagedStoreRefused damages raft.db the ways a disk, an operator or an
// attacker can, and requires the server to refuse to start with a message
// saying what is wrong and how to recover, instead of starting empty,
// starting without the last acknowledged writes, panicking, allocating
// gigabytes, or serving an altered value.
func TestDamagedStoreRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, db string)
		wantMsg string
	}{
		{"truncated to 0 bytes", func(t *testing.T, db string) {
			if err := os.Truncate(db, 0); err != nil {
				t.Fatal(err)
			}
		}, "is empty (0 bytes)"},
		{"deleted", func(t *testing.T, db string) {
			if err := os.Remove(db); err != nil {
				t.Fatal(err)
			}
		}, "is missing"},
		{"first meta page zeroed", func(t *testing.T, db string) {
			b := readFile(t, db)
			copy(b[:pageSizeOf(t, b)], make([]byte, pageSizeOf(t, b)))
			writeFile(t, db, b)
		}, "meta page 0 is invalid"},
		{"second meta page zeroed", func(t *testing.T, db string) {
			b := readFile(t, db)
			ps := pageSizeOf(t, b)
			copy(b[ps:2*ps], make([]byte, ps))
			writeFile(t, db, b)
		}, "meta page 1 is invalid"},
		{"half truncated", func(t *testing.T, db string) {
			fi, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(db, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "truncated"},
		{"freelist page overwritten with random bytes", func(t *testing.T, db string) {
			b := readFile(t, db)
			ps := pageSizeOf(t, b)
			// The newest meta page names the freelist page.
			m := 0
			if binary.LittleEndian.Uint64(b[ps+16+48:]) > binary.LittleEndian.Uint64(b[16+48:]) {
				m = ps
			}
			fl := int(binary.LittleEndian.Uint64(b[m+16+32:]))
			r := rand.New(rand.NewPCG(1, 2))
			for i := fl * ps; i < (fl+1)*ps; i++ {
				b[i] = byte(r.Uint32())
			}
			binary.LittleEndian.PutUint64(b[fl*ps:], uint64(fl)) // keep its ID: only the contents are garbage
			binary.LittleEndian.PutUint16(b[fl*ps+8:], 0x10)
			binary.LittleEndian.PutUint16(b[fl*ps+10:], 0xFFFF) // count overflow: the first element is a huge count
			binary.LittleEndian.PutUint32(b[fl*ps+12:], 0)      // no overflow pages
			writeFile(t, db, b)
		}, "freelist page"},
		{"one byte changed inside a log entry", func(t *testing.T, db string) {
			b := readFile(t, db)
			n := bytes.Count(b, []byte(damageRevision))
			if n == 0 {
				t.Fatalf("precondition: %q not found in raft.db", damageRevision)
			}
			b = bytes.ReplaceAll(b, []byte(damageRevision), []byte(strings.Replace(damageRevision, "7f3a", "7f3b", 1)))
			writeFile(t, db, b)
		}, "fails its checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			storeWithState(t, dir)
			db := filepath.Join(dir, "raft", "raft.db")
			tc.damage(t, db)
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			srv, err := New(diskConfig(t, dir))
			if err == nil {
				defer srv.Shutdown()
				rev := "(none)"
				if b := srv.FSM().Read().Budgets(); b != nil {
					rev = b.Revision
				}
				t.Fatalf("the server started on a damaged raft.db (budgets revision %s, usage %d GPU-s of %d acknowledged)",
					rev, usage(srv, "ai2/nlp"), 40*8*60)
			}
			msg := err.Error()
			for _, want := range []string{tc.wantMsg, "restore", "rejoin", "remove-peer"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q:\n%s", want, msg)
				}
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 256<<20 {
				t.Errorf("refusing the store allocated %d MiB", grown>>20)
			}
		})
	}
}

// TestRandomPagesOverwrittenNeverServeOrExplode overwrites 15 random pages
// of raft.db, for several seeds: the server either refuses to start, or
// starts with every acknowledged write intact (the pages hit were free),
// and it never panics or allocates without bound.
func TestRandomPagesOverwrittenNeverServeOrExplode(t *testing.T) {
	refused := 0
	for seed := uint64(1); seed <= 8; seed++ {
		dir := t.TempDir()
		storeWithState(t, dir)
		db := filepath.Join(dir, "raft", "raft.db")
		b := readFile(t, db)
		ps := pageSizeOf(t, b)
		r := rand.New(rand.NewPCG(seed, 99))
		for range 15 {
			p := r.IntN(len(b) / ps)
			for i := p * ps; i < (p+1)*ps; i++ {
				b[i] = byte(r.Uint32())
			}
		}
		writeFile(t, db, b)
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		srv, err := New(diskConfig(t, dir))
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 256<<20 {
			t.Errorf("seed %d: opening the store allocated %d MiB", seed, grown>>20)
		}
		if err != nil {
			refused++
			if !strings.Contains(err.Error(), "restore") {
				t.Errorf("seed %d: refusal does not say how to recover: %v", seed, err)
			}
			continue
		}
		waitFor(t, 20*time.Second, "the server to lead", func() error {
			_, err := srv.leaderHTTP()
			return err
		})
		if err := srv.Raft().Barrier(10 * time.Second).Error(); err != nil {
			t.Fatalf("seed %d: barrier: %v", seed, err)
		}
		if got := usage(srv, "ai2/nlp"); got != 40*8*60 {
			t.Errorf("seed %d: started with usage %d GPU-s, want the %d acknowledged", seed, got, 40*8*60)
		}
		if bs := srv.FSM().Read().Budgets(); bs == nil || bs.Revision != damageRevision {
			t.Errorf("seed %d: started with budgets %+v", seed, bs)
		}
		srv.Shutdown()
	}
	t.Logf("15 random pages overwritten: %d of 8 seeds refused, the rest started intact", refused)
}

// A clean restart is not refused, and the identity file keeps the ID.
func TestIdentityKeepsServerIDAndIndex(t *testing.T) {
	dir := t.TempDir()
	storeWithState(t, dir)
	id, ok, err := readIdentity(dir)
	if err != nil || !ok {
		t.Fatalf("identity after a clean stop: %+v %v %v", id, ok, err)
	}
	if id.LastIndex < 41 || id.ClusterID == "" || id.ChecksumsFrom != 1 {
		t.Fatalf("identity after 41 writes: %+v", id)
	}
	srv := startOn(t, dir)
	defer srv.Shutdown()
	if srv.ID() != id.ServerID {
		t.Fatalf("restarted with ID %s, identity says %s", srv.ID(), id.ServerID)
	}
	if got := usage(srv, "ai2/nlp"); got != 40*8*60 {
		t.Fatalf("usage after a clean restart %d", got)
	}
	cfg := diskConfig(t, dir)
	cfg.NodeID = "someone-else"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "holds the state of server") {
		t.Fatalf("a node_id other than the data_dir's: %v", err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBadTLSFilesRefusedBeforeDataDir: a missing certificate is reported
// before anything is written to data_dir (it used to be found only after
// raft had bootstrapped there).
func TestBadTLSFilesRefusedBeforeDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := diskConfig(t, dir)
	cfg.TLS = TLSConfig{HTTP: true, CertFile: filepath.Join(t.TempDir(), "missing.pem"), KeyFile: filepath.Join(t.TempDir(), "missing-key.pem")}
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "cert_file") {
		t.Fatalf("New with a missing certificate: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("data_dir was written before the TLS files were checked: %v", names)
	}
}

func readFileBytes(path string) ([]byte, error) { return os.ReadFile(path) }

// TestDamagedSnapshotRefused: raft skips a snapshot whose meta.json it
// cannot read and falls back to an older one when the newest fails its
// CRC; either could start the server without writes. Both are refused.
func TestDamagedSnapshotRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, wantMsg string
	}{
		{"state.bin byte changed", "state.bin", "CRC mismatch"},
		{"meta.json damaged", "meta.json", "no readable meta.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			storeWithState(t, dir)
			srv := startOn(t, dir)
			if err := srv.Raft().Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
			srv.Shutdown()
			snaps, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", tc.file))
			if len(snaps) == 0 {
				t.Fatal("precondition: no snapshot")
			}
			path := snaps[len(snaps)-1]
			b := readFile(t, path)
			if tc.file == "meta.json" {
				b = b[:len(b)/2] // cut short: not JSON any more
			} else {
				b[len(b)/2] ^= 0x20
			}
			writeFile(t, path, b)
			srv, err := New(diskConfig(t, dir))
			if err == nil {
				srv.Shutdown()
				t.Fatal("the server started on a damaged snapshot")
			}
			for _, want := range []string{tc.wantMsg, "restore", "rejoin"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
		})
	}
}

// Right after the first start, before any write or the first periodic
// record, an emptied raft.db is already refused: the bootstrap entry's
// index is recorded at once.
func TestEmptiedRightAfterBootstrapRefused(t *testing.T) {
	dir := t.TempDir()
	srv, err := New(diskConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	if err := os.Truncate(filepath.Join(dir, "raft", "raft.db"), 0); err != nil {
		t.Fatal(err)
	}
	if srv, err := New(diskConfig(t, dir)); err == nil {
		srv.Shutdown()
		t.Fatal("started empty over a data_dir that had bootstrapped")
	}
}

// A data_dir written before identity.json existed (a node-id file and a
// raft.db) starts with its ID and state, and gets an identity whose
// checksums start after its last entry. (Checked by hand with a binary of
// the previous main, whose entries carry no checksums: it started with its
// budgets, log_checksums_from = 6.)
func TestDataDirWithoutIdentityUpgrades(t *testing.T) {
	dir := t.TempDir()
	storeWithState(t, dir)
	id, _, _ := readIdentity(dir)
	if err := os.Remove(filepath.Join(dir, identityFile)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "node-id"), []byte(id.ServerID+"\n"))
	srv := startOn(t, dir)
	defer srv.Shutdown()
	if srv.ID() != id.ServerID {
		t.Fatalf("ID after the upgrade %s, want %s (from node-id)", srv.ID(), id.ServerID)
	}
	if got := usage(srv, "ai2/nlp"); got != 40*8*60 {
		t.Fatalf("usage after the upgrade %d", got)
	}
	up, ok, err := readIdentity(dir)
	if err != nil || !ok || up.ServerID != id.ServerID || up.ChecksumsFrom <= 41 {
		t.Fatalf("identity after the upgrade: %+v %v %v", up, ok, err)
	}
}
