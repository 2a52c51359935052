package server

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// seedBoltFile returns the bytes of a small raft.db written by raft-boltdb
// through the checked log store.
func seedBoltFile(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "raft.db")
	store, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		f.Fatal(err)
	}
	logs := &checkedLogStore{LogStore: store, from: 1, fail: newStoreFailure(func(error) {})}
	for i := uint64(1); i <= 50; i++ {
		if err := logs.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 100)}); err != nil {
			f.Fatal(err)
		}
	}
	if err := store.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		f.Fatal(err)
	}
	store.Close()
	return readFileF(f, path)
}

func readFileF(f *testing.F, path string) []byte {
	b, err := readFileBytes(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzCheckBoltFile: whatever is written over a real raft.db (three
// patches of 8 bytes anywhere in it, and a new length), the check returns
// without panicking and reads only within the file.
func FuzzCheckBoltFile(f *testing.F) {
	seed := seedBoltFile(f)
	f.Add(uint32(0), uint64(0), uint32(0), uint64(0), uint32(0), uint64(0), uint32(len(seed)))
	f.Add(uint32(3*4096+8), uint64(0xFFFF0010), uint32(3*4096+16), uint64(1<<62), uint32(0), uint64(0), uint32(len(seed)))
	f.Add(uint32(2*4096+16), uint64(0xdeadbeef), uint32(4096+56), uint64(1<<40), uint32(16+56), uint64(99), uint32(len(seed)/2))
	f.Fuzz(func(t *testing.T, at1 uint32, v1 uint64, at2 uint32, v2 uint64, at3 uint32, v3 uint64, size uint32) {
		b := append([]byte(nil), seed...)
		for _, p := range []struct {
			at uint32
			v  uint64
		}{{at1, v1}, {at2, v2}, {at3, v3}} {
			if int(p.at)+8 <= len(b) {
				binary.LittleEndian.PutUint64(b[p.at:], p.v)
			}
		}
		if int(size) < len(b) {
			b = b[:size]
		}
		c := &boltChecker{f: bytes.NewReader(b), size: int64(len(b))}
		_ = c.check()
	})
}

// FuzzUnseal: a log entry's extensions, however altered, are either
// verified or refused, never a panic.
func FuzzUnseal(f *testing.F) {
	s := &checkedLogStore{from: 1}
	l := s.seal(&raft.Log{Index: 7, Term: 2, Data: []byte("budgets")})
	f.Add(l.Extensions, []byte("budgets"), uint64(7))
	f.Add([]byte{}, []byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, ext, data []byte, index uint64) {
		in := raft.Log{Index: index, Term: 2, Data: data, Extensions: ext}
		if err := unseal(index, &in, 1); err == nil && index >= 1 {
			// Accepted: it must carry a valid checksum over what it holds.
			if !bytes.HasPrefix(ext, checksumMagic) {
				t.Fatalf("entry %d without a checksum accepted", index)
			}
		}
	})
}
