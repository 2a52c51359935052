package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// recoverHint is what every damaged-store error ends with.
const recoverHint = "to recover, either restore the cluster from a snapshot (allot keeps raft snapshots in data_dir/raft/snapshots; " +
	"see \"Operating allot\" in README.md), or rejoin this server from its peers: stop it, move data_dir aside, run " +
	"`allot operator raft remove-peer -id ID` against the cluster, and start it again with an empty data_dir"

// diskStore is a server's raft state on disk: the checked log and stable
// stores over data_dir/raft/raft.db, the snapshots, and the identity.
type diskStore struct {
	dir    string
	bolt   *raftboltdb.BoltStore
	logs   *checkedLogStore
	stable *checkedStableStore
	snaps  *raft.FileSnapshotStore
	fail   *storeFailure

	mu       sync.Mutex // guards identity
	identity identity
}

// openDiskStore opens data_dir's raft state, refusing a damaged one: a
// bbolt file whose structure is broken (checked before bbolt maps it), a
// log entry or stable value whose checksum fails, a raft.db that is
// missing, empty or shorter than what this server had applied. wantID is
// the configured server ID (may be empty). onFail is told of the first
// write the stores cannot make.
func openDiskStore(dataDir, wantID string, log hclog.Logger, onFail func(error)) (_ *diskStore, err error) {
	logf := log.Info
	defer func() {
		if err != nil && errors.Is(err, ErrDamagedStore) {
			err = fmt.Errorf("%w; %s", err, recoverHint)
		}
	}()
	if err := os.MkdirAll(filepath.Join(dataDir, "raft"), 0o700); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	id, had, err := readIdentity(dataDir)
	if err != nil {
		return nil, err
	}
	dbPath := filepath.Join(dataDir, "raft", "raft.db")
	fi, statErr := os.Stat(dbPath)
	dbEmpty := errors.Is(statErr, os.ErrNotExist) || statErr == nil && fi.Size() == 0
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return nil, fmt.Errorf("data_dir: %w", statErr)
	}
	legacyID := readLegacyNodeID(dataDir)
	switch {
	case had && wantID != "" && id.ServerID != wantID && id.LastIndex > 0:
		return nil, fmt.Errorf("data_dir %s holds the state of server %q but node_id is %q: point data_dir at this server's own directory, or set node_id = %q",
			dataDir, id.ServerID, wantID, id.ServerID)
	case had && dbEmpty && id.LastIndex > 0:
		what := "is missing"
		if statErr == nil {
			what = "is empty (0 bytes)"
		}
		return nil, fmt.Errorf("%w: data_dir %s held the state of server %q up to raft index %d (%s), but %s %s; the server will not start empty over it",
			ErrDamagedStore, dataDir, id.ServerID, id.LastIndex, identityFile, dbPath, what)
	case !had:
		id.ServerID = wantID
		if id.ServerID == "" {
			id.ServerID = legacyID
		}
		if id.ServerID == "" {
			if id.ServerID, err = randomID(); err != nil {
				return nil, err
			}
		}
		id.ChecksumsFrom = 1 // a fresh store; an older one is set below once its last index is known
	}
	if err := checkBoltFile(dbPath); err != nil {
		return nil, err
	}
	bolt, err := openBolt(dbPath)
	if err != nil {
		return nil, err
	}
	ds := &diskStore{dir: dataDir, bolt: bolt, fail: newStoreFailure(onFail)}
	ok := false
	defer func() {
		if !ok {
			bolt.Close()
		}
	}()
	if !had && !dbEmpty {
		// A store written by an allot that kept no identity: its entries
		// carry no checksums. Every entry from here on will.
		last, err := bolt.LastIndex()
		if err != nil {
			return nil, fmt.Errorf("%w: read last log index: %v", ErrDamagedStore, err)
		}
		id.ChecksumsFrom = last + 1
		logf("upgrading data_dir: log entries from this index on carry checksums", "index", id.ChecksumsFrom)
	}
	if had && wantID != "" && id.ServerID != wantID {
		// The identity was written by a start that never got a raft entry
		// stored (it failed, or was stopped at once): nothing holds the
		// old ID yet, so the configured one replaces it.
		if last, err := bolt.LastIndex(); err != nil || last > 0 {
			return nil, fmt.Errorf("data_dir %s holds the state of server %q but node_id is %q: point data_dir at this server's own directory, or set node_id = %q",
				dataDir, id.ServerID, wantID, id.ServerID)
		}
		logf("data_dir holds no raft entries yet: taking the configured node_id", "old", id.ServerID, "node_id", wantID)
		id.ServerID = wantID
	}
	ds.logs = &checkedLogStore{LogStore: bolt, from: id.ChecksumsFrom, fail: ds.fail}
	ds.stable = &checkedStableStore{StableStore: bolt, fail: ds.fail}
	_, last, err := verifyLogs(ds.logs)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
		if _, err := ds.stable.GetUint64([]byte(k)); err != nil && err.Error() != "not found" {
			return nil, fmt.Errorf("%w: read %s: %v", ErrDamagedStore, k, err)
		}
	}
	if ds.snaps, err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(dataDir, "raft"), 2, log.Named("snapshot")); err != nil {
		return nil, fmt.Errorf("raft snapshot store: %w", err)
	}
	snapIdx, err := checkSnapshots(filepath.Join(dataDir, "raft", "snapshots"), ds.snaps)
	if err != nil {
		return nil, err
	}
	if reached := max(last, snapIdx); reached < id.LastIndex {
		return nil, fmt.Errorf("%w: %s ends at raft index %d (snapshot %d) but this server had applied up to %d (%s): acknowledged writes are missing",
			ErrDamagedStore, dbPath, last, snapIdx, id.LastIndex, identityFile)
	}
	ds.identity = id
	if err := writeIdentity(dataDir, id); err != nil {
		return nil, err
	}
	ok = true
	return ds, nil
}

// checkSnapshots refuses a snapshot directory raft would skip or fail on:
// raft lists only snapshots whose meta.json it can read and, when the
// newest fails its CRC, silently restores an older one, which can start the
// server without writes the newest held. It returns the newest's index.
func checkSnapshots(dir string, snaps *raft.FileSnapshotStore) (uint64, error) {
	metas, err := snaps.List()
	if err != nil {
		return 0, fmt.Errorf("%w: list snapshots in %s: %v", ErrDamagedStore, dir, err)
	}
	listed := map[string]bool{}
	for _, m := range metas {
		listed[m.ID] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w: read %s: %v", ErrDamagedStore, dir, err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") && !listed[e.Name()] {
			return 0, fmt.Errorf("%w: snapshot %s has no readable meta.json", ErrDamagedStore, filepath.Join(dir, e.Name()))
		}
	}
	if len(metas) == 0 {
		return 0, nil
	}
	_, rc, err := snaps.Open(metas[0].ID) // reads it whole and checks its CRC
	if err != nil {
		return 0, fmt.Errorf("%w: snapshot %s (index %d): %v", ErrDamagedStore, filepath.Join(dir, metas[0].ID), metas[0].Index, err)
	}
	rc.Close()
	return metas[0].Index, nil
}

// openBolt opens raft.db, turning a panic or a memory fault inside bbolt
// (a file damaged in a way checkBoltFile did not see) into an error.
func openBolt(path string) (store *raftboltdb.BoltStore, err error) {
	type result struct {
		store *raftboltdb.BoltStore
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		debug.SetPanicOnFault(true) // this goroutine only
		defer func() {
			if r := recover(); r != nil {
				ch <- result{err: fmt.Errorf("%w: opening %s: bbolt failed: %v", ErrDamagedStore, path, r)}
			}
		}()
		s, err := raftboltdb.New(raftboltdb.Options{Path: path,
			// Another allot server on the same data_dir holds the lock.
			BoltOptions: &bbolt.Options{Timeout: 5 * time.Second}})
		ch <- result{store: s, err: err}
	}()
	r := <-ch
	if r.err != nil {
		if errors.Is(r.err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("raft log store %s is locked: another allot server runs on this data_dir", path)
		}
		if errors.Is(r.err, ErrDamagedStore) {
			return nil, r.err
		}
		return nil, fmt.Errorf("%w: opening %s: %v", ErrDamagedStore, path, r.err)
	}
	return r.store, nil
}

// readLegacyNodeID reads data_dir/node-id, which allot wrote before it kept
// an identity file.
func readLegacyNodeID(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "node-id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ident returns the identity as last written.
func (d *diskStore) ident() identity {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.identity
}

// record notes the applied index (and the cluster ID, once known) in the
// identity file when either moved.
func (d *diskStore) record(applied uint64, clusterID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if applied <= d.identity.LastIndex && (clusterID == "" || clusterID == d.identity.ClusterID) {
		return nil
	}
	next := d.identity
	next.LastIndex = max(next.LastIndex, applied)
	if clusterID != "" {
		next.ClusterID = clusterID
	}
	if err := writeIdentity(d.dir, next); err != nil {
		return err
	}
	d.identity = next
	return nil
}

// peersFile is data_dir/raft/peers.json: an operator's statement of who the
// cluster's servers are, for recovery (raft's format, as Nomad and Consul
// read it): [{"id": "...", "address": "host:port", "non_voter": false}].
// At start the server rewrites its raft configuration to it
// (raft.RecoverCluster) and renames the file to peers.json.applied. With a
// data_dir holding only a copied snapshot, this restores a cluster from a
// backup.
const peersFile = "peers.json"

// recoverFromPeersFile applies data_dir/raft/peers.json when there is one.
func (s *Server) recoverFromPeersFile(rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	path := filepath.Join(s.cfg.DataDir, "raft", peersFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return fmt.Errorf("%s: %w (want [{\"id\": \"SERVER_ID\", \"address\": \"host:raft_port\", \"non_voter\": false}, ...])", path, err)
	}
	found := false
	for _, srv := range conf.Servers {
		found = found || srv.ID == rc.LocalID
	}
	if !found {
		return fmt.Errorf("%s does not list this server's ID %q: add it (or set node_id to the ID listed for this server)", path, rc.LocalID)
	}
	tmp, err := state.NewFSM(s.cfg.FSM) // RecoverCluster replays into an FSM of its own
	if err != nil {
		return err
	}
	if err := raft.RecoverCluster(rc, tmp, logs, stable, snaps, s.trans, conf); err != nil {
		return fmt.Errorf("recover the raft configuration from %s: %w", path, err)
	}
	if err := os.Rename(path, path+".applied"); err != nil {
		return fmt.Errorf("recovered from %s but could not rename it (remove it before the next start): %w", path, err)
	}
	s.log.Warn("raft configuration recovered from peers.json", "servers", len(conf.Servers), "file", path+".applied")
	return nil
}
