package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/hashicorp/raft"
)

// checksumMagic starts the Extensions of every log entry (and every stable
// value) written through the checked stores, followed by a CRC-32C of the
// entry. The stores are local to one server: the checksum never travels to
// peers (the leader strips it on read, a follower adds its own on write).
var checksumMagic = []byte{0xa1, 0x07, 0xc5, 0x01}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func logChecksum(l *raft.Log, ext []byte) uint32 {
	var head [25]byte
	binary.LittleEndian.PutUint64(head[0:], l.Index)
	binary.LittleEndian.PutUint64(head[8:], l.Term)
	head[16] = byte(l.Type)
	binary.LittleEndian.PutUint64(head[17:], uint64(len(l.Data)))
	h := crc32.New(castagnoli)
	h.Write(head[:])
	h.Write(l.Data)
	h.Write(ext)
	return h.Sum32()
}

// storeFailure records the first write the stores could not make (a disk
// turned read-only or full, the file closed under them) and tells the
// server, which stops: raft cannot run on a log it cannot extend.
type storeFailure struct {
	once    sync.Once
	onFail  func(error)
	release chan struct{} // closed when the server stops
}

func newStoreFailure(onFail func(error)) *storeFailure {
	return &storeFailure{onFail: onFail, release: make(chan struct{})}
}

func (f *storeFailure) fail(op string, err error) error {
	err = fmt.Errorf("raft store: %s: %w", op, err)
	f.once.Do(func() { f.onFail(err) })
	return err
}

func (f *storeFailure) stop() {
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

// checkedLogStore wraps the log store: it adds a checksum to every entry it
// stores and verifies it on every read, so an entry altered on disk is an
// error instead of a value served; and it reports write failures.
type checkedLogStore struct {
	raft.LogStore
	from uint64 // entries from this index on must carry a checksum
	fail *storeFailure
}

func (s *checkedLogStore) seal(l *raft.Log) *raft.Log {
	c := *l
	ext := make([]byte, 0, len(checksumMagic)+4+len(l.Extensions))
	ext = append(ext, checksumMagic...)
	ext = binary.LittleEndian.AppendUint32(ext, logChecksum(l, l.Extensions))
	c.Extensions = append(ext, l.Extensions...)
	return &c
}

func (s *checkedLogStore) StoreLog(l *raft.Log) error {
	if err := s.LogStore.StoreLog(s.seal(l)); err != nil {
		return s.fail.fail(fmt.Sprintf("store log entry %d", l.Index), err)
	}
	return nil
}

func (s *checkedLogStore) StoreLogs(logs []*raft.Log) error {
	sealed := make([]*raft.Log, len(logs))
	for i, l := range logs {
		sealed[i] = s.seal(l)
	}
	if err := s.LogStore.StoreLogs(sealed); err != nil {
		return s.fail.fail(fmt.Sprintf("store %d log entries", len(logs)), err)
	}
	return nil
}

func (s *checkedLogStore) DeleteRange(lo, hi uint64) error {
	if err := s.LogStore.DeleteRange(lo, hi); err != nil {
		return s.fail.fail(fmt.Sprintf("delete log entries %d-%d", lo, hi), err)
	}
	return nil
}

func (s *checkedLogStore) GetLog(index uint64, l *raft.Log) error {
	if err := s.LogStore.GetLog(index, l); err != nil {
		return err
	}
	return unseal(index, l, s.from)
}

// unseal verifies and strips an entry's checksum.
func unseal(index uint64, l *raft.Log, from uint64) error {
	ext := l.Extensions
	if !bytes.HasPrefix(ext, checksumMagic) || len(ext) < len(checksumMagic)+4 {
		if index >= from {
			return fmt.Errorf("%w: log entry %d has no checksum (every entry from %d on was written with one): it was overwritten",
				ErrDamagedStore, index, from)
		}
		return nil // written before checksums
	}
	want := binary.LittleEndian.Uint32(ext[len(checksumMagic):])
	l.Extensions = ext[len(checksumMagic)+4:]
	if len(l.Extensions) == 0 {
		l.Extensions = nil
	}
	if l.Index != index {
		return fmt.Errorf("%w: log entry %d holds index %d", ErrDamagedStore, index, l.Index)
	}
	if got := logChecksum(l, l.Extensions); got != want {
		return fmt.Errorf("%w: log entry %d (term %d) fails its checksum (%08x, want %08x): its bytes were altered on disk",
			ErrDamagedStore, index, l.Term, got, want)
	}
	return nil
}

// checkedStableStore wraps the stable store (current term, last vote) the
// same way. A value written before checksums (no magic) is read as is.
//
// raft panics when it cannot save its current term. A failed write here
// instead stops the server and blocks the raft goroutine until the server
// has closed its transport, so that no message carrying the unsaved term
// leaves; it then returns nil to let raft shut down.
type checkedStableStore struct {
	raft.StableStore
	fail *storeFailure
}

func (s *checkedStableStore) Set(key, val []byte) error {
	sealed := append(append(append([]byte{}, checksumMagic...), 0, 0, 0, 0), val...)
	binary.LittleEndian.PutUint32(sealed[len(checksumMagic):], crc32.Checksum(append(append([]byte{}, key...), val...), castagnoli))
	if err := s.StableStore.Set(key, sealed); err != nil {
		s.fail.fail(fmt.Sprintf("save %q", key), err)
		<-s.fail.release
		return nil
	}
	return nil
}

func (s *checkedStableStore) Get(key []byte) ([]byte, error) {
	v, err := s.StableStore.Get(key)
	if err != nil || !bytes.HasPrefix(v, checksumMagic) {
		return v, err
	}
	if len(v) < len(checksumMagic)+4 {
		return nil, fmt.Errorf("%w: stable value %q is cut short", ErrDamagedStore, key)
	}
	want := binary.LittleEndian.Uint32(v[len(checksumMagic):])
	val := v[len(checksumMagic)+4:]
	if crc32.Checksum(append(append([]byte{}, key...), val...), castagnoli) != want {
		return nil, fmt.Errorf("%w: stable value %q fails its checksum: its bytes were altered on disk", ErrDamagedStore, key)
	}
	return val, nil
}

func (s *checkedStableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *checkedStableStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err // raft reads "not found" as zero: keep the store's error as is
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable value %q is %d bytes, want 8", ErrDamagedStore, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// verifyLogs reads every entry of the log through the checked store, so
// that a damaged entry stops the server at start, with the index named,
// instead of panicking raft when it applies it.
func verifyLogs(logs raft.LogStore) (first, last uint64, err error) {
	if first, err = logs.FirstIndex(); err != nil {
		return 0, 0, fmt.Errorf("%w: read first log index: %v", ErrDamagedStore, err)
	}
	if last, err = logs.LastIndex(); err != nil {
		return 0, 0, fmt.Errorf("%w: read last log index: %v", ErrDamagedStore, err)
	}
	if last == 0 {
		return first, last, nil
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, ErrDamagedStore) {
				return 0, 0, err
			}
			return 0, 0, fmt.Errorf("%w: log entry %d of %d-%d: %v", ErrDamagedStore, i, first, last, err)
		}
	}
	return first, last, nil
}
