package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// identityFile is data_dir/identity.json: which server this data_dir
// belongs to, which cluster it is part of, and how far its raft log had
// reached. It lets a server refuse to start empty over a data_dir that
// held state (a deleted or truncated raft.db), and refuse a raft.db that
// ends before the index this server had already applied.
const identityFile = "identity.json"

// identity is the content of identityFile. It is written whole, to a
// temporary file that is synced and renamed over the old one.
type identity struct {
	// ServerID is this server's raft ID.
	ServerID string `json:"server_id"`
	// ClusterID names the cluster this server bootstrapped or joined
	// (empty until known).
	ClusterID string `json:"cluster_id,omitempty"`
	// LastIndex is the highest raft index this server had applied, as last
	// recorded (every few seconds and at shutdown).
	LastIndex uint64 `json:"last_index"`
	// ChecksumsFrom is the first log index written with a checksum: every
	// entry from it on must carry one (entries before it were written by a
	// version of allot that wrote none).
	ChecksumsFrom uint64 `json:"log_checksums_from"`
}

// readIdentity reads data_dir's identity; ok is false when there is none.
func readIdentity(dataDir string) (id identity, ok bool, err error) {
	path := filepath.Join(dataDir, identityFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return identity{}, false, nil
	}
	if err != nil {
		return identity{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&id); err != nil || id.ServerID == "" {
		if err == nil {
			err = errors.New("no server_id")
		}
		return identity{}, false, fmt.Errorf("%w: %s is not a valid identity file (%v); restore it from a backup, or move data_dir aside and rejoin this server from its peers",
			ErrDamagedStore, path, err)
	}
	return id, true, nil
}

// writeIdentity replaces data_dir's identity atomically: a crash leaves
// either the old file or the new one, never a torn one.
func writeIdentity(dataDir string, id identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, identityFile)
	tmp, err := os.CreateTemp(dataDir, identityFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dataDir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
