package state

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/allot-sched/allot/budgets"
	memdb "github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"
)

// snapshotMagic starts every snapshot; the last byte is the format version.
var snapshotMagic = []byte("allot-state\x01")

// ErrBadSnapshot is wrapped by Restore's error for a snapshot it cannot read.
var ErrBadSnapshot = errors.New("malformed state snapshot")

// tables is the JSON body of a snapshot. Rows are in id order, so the same
// state always encodes to the same bytes.
type tables struct {
	Budgets     []*BudgetSet
	Jobs        []*Job
	Allocs      []*Alloc
	Nodes       []*Node
	Decisions   []*Decision
	Priorities  []*Priority
	Queue       []*QueueEntry
	Servers     []*Server
	DemandMarks []*DemandMark
	Drains      []*DrainRecord
	DrainStats  []*DrainStats
	// Notices: absent from snapshots taken before they were replicated
	// (and when none is in flight, so those encode as they did).
	Notices []*Notice `json:",omitempty"`
}

// fsmSnapshot is a point-in-time state: memdb's own immutable snapshot and
// a private copy of the ledger's bytes.
type fsmSnapshot struct {
	db     *memdb.MemDB
	ledger []byte
}

// Persist encodes the snapshot into sink: magic, the tables as
// length-prefixed JSON, then the length-prefixed ledger.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.writeTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) writeTo(w io.Writer) error {
	body, err := json.Marshal(dumpTables(s.db.Txn(false)))
	if err != nil {
		return fmt.Errorf("encode state tables: %w", err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.Write(snapshotMagic)
	for _, part := range [][]byte{body, s.ledger} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		bw.Write(n[:])
		bw.Write(part)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// Release is a no-op: the memdb snapshot is garbage-collected.
func (s *fsmSnapshot) Release() {}

func dumpTables(txn *memdb.Txn) *tables {
	t := &tables{}
	collect(txn, TableBudgets, &t.Budgets)
	collect(txn, TableJobs, &t.Jobs)
	collect(txn, TableAllocs, &t.Allocs)
	collect(txn, TableNodes, &t.Nodes)
	collect(txn, TableDecisions, &t.Decisions)
	collect(txn, TablePriorities, &t.Priorities)
	collect(txn, TableQueue, &t.Queue)
	collect(txn, TableServers, &t.Servers)
	collect(txn, TableDemandMarks, &t.DemandMarks)
	collect(txn, TableDrains, &t.Drains)
	collect(txn, TableDrainStats, &t.DrainStats)
	collect(txn, TableNotices, &t.Notices)
	return t
}

// collect appends every row of table, in id order, to *out.
func collect[T any](txn *memdb.Txn, table string, out *[]*T) {
	it, err := txn.Get(table, "id")
	if err != nil {
		// Only an unknown table or index fails here: a programming error.
		panic(fmt.Sprintf("state: iterate %s: %v", table, err))
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		*out = append(*out, raw.(*T))
	}
}

// readSnapshot decodes a snapshot into a fresh memdb and ledger.
func readSnapshot(r io.Reader, cfg FSMConfig) (*memdb.MemDB, *budgets.Ledger, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != string(snapshotMagic) {
		return nil, nil, fmt.Errorf("%w: bad header (want %q)", ErrBadSnapshot, snapshotMagic)
	}
	body, err := readPart(br)
	if err != nil {
		return nil, nil, err
	}
	ledgerBytes, err := readPart(br)
	if err != nil {
		return nil, nil, err
	}
	var t tables
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, nil, fmt.Errorf("%w: tables: %v", ErrBadSnapshot, err)
	}
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, nil, err
	}
	if err := loadTables(db, &t); err != nil {
		return nil, nil, err
	}
	ledger := cfg.newLedger()
	if err := ledger.UnmarshalBinary(ledgerBytes); err != nil {
		return nil, nil, fmt.Errorf("%w: ledger: %v", ErrBadSnapshot, err)
	}
	ledger.SetMaxAdvance(cfg.MaxAdvance) // configuration, not in the encoding
	return db, ledger, nil
}

// maxSnapshotPart bounds one part of a snapshot; the 14-day ledger of 1,000
// leaves is far below it.
const maxSnapshotPart = 4 << 30

func readPart(r io.Reader) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > maxSnapshotPart {
		return nil, fmt.Errorf("%w: part of %d bytes exceeds %d", ErrBadSnapshot, size, maxSnapshotPart)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
	}
	return buf, nil
}

func loadTables(db *memdb.MemDB, t *tables) error {
	for _, b := range t.Budgets {
		tree, err := budgets.NewTree(b.Specs)
		if err != nil {
			return fmt.Errorf("%w: stored budget tree: %v", ErrBadSnapshot, err)
		}
		b.tree = tree
	}
	txn := db.Txn(true)
	defer txn.Abort()
	if err := insertAll(txn, TableBudgets, t.Budgets); err != nil {
		return err
	}
	for _, step := range []error{
		insertAll(txn, TableJobs, t.Jobs), insertAll(txn, TableAllocs, t.Allocs),
		insertAll(txn, TableNodes, t.Nodes), insertAll(txn, TableDecisions, t.Decisions),
		insertAll(txn, TablePriorities, t.Priorities), insertAll(txn, TableQueue, t.Queue),
		insertAll(txn, TableServers, t.Servers), insertAll(txn, TableDemandMarks, t.DemandMarks),
		insertAll(txn, TableDrains, t.Drains), insertAll(txn, TableDrainStats, t.DrainStats),
		insertAll(txn, TableNotices, t.Notices),
	} {
		if step != nil {
			return step
		}
	}
	txn.Commit()
	return nil
}

func insertAll[T any](txn *memdb.Txn, table string, rows []*T) error {
	for _, r := range rows {
		if r == nil {
			return fmt.Errorf("%w: %s: null row", ErrBadSnapshot, table)
		}
		if err := txn.Insert(table, r); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadSnapshot, table, err)
		}
	}
	return nil
}
