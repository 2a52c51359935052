package state

import memdb "github.com/hashicorp/go-memdb"

// Table names.
const (
	TableBudgets     = "budgets"
	TableJobs        = "jobs"
	TableAllocs      = "allocs"
	TableNodes       = "nodes"
	TableDecisions   = "decisions"
	TablePriorities  = "priorities"
	TableQueue       = "queue"
	TableServers     = "servers"
	TableDemandMarks = "demand_marks"
)

// schema is the memdb schema: one xTableSchema per table, each with a unique
// "id" index.
func schema() *memdb.DBSchema {
	tables := []*memdb.TableSchema{
		budgetsTableSchema(), jobsTableSchema(), allocsTableSchema(), nodesTableSchema(),
		decisionsTableSchema(), prioritiesTableSchema(), queueTableSchema(), serversTableSchema(),
		demandMarksTableSchema(), drainsTableSchema(), drainStatsTableSchema(), noticesTableSchema(),
	}
	s := &memdb.DBSchema{Tables: make(map[string]*memdb.TableSchema, len(tables))}
	for _, t := range tables {
		s.Tables[t.Name] = t
	}
	return s
}

func idIndex(field string) *memdb.IndexSchema {
	return &memdb.IndexSchema{Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: field}}
}

func budgetsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableBudgets, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("ID")}}
}

func jobsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableJobs, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("ID")}}
}

// allocsTableSchema also indexes by job, so a job's allocations are one
// lookup. A charge may arrive before the allocation's lifecycle, so the job
// may be missing.
func allocsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableAllocs, Indexes: map[string]*memdb.IndexSchema{
		"id":  idIndex("ID"),
		"job": {Name: "job", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "JobID"}},
	}}
}

func nodesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableNodes, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("ID")}}
}

// decisionsTableSchema keys decisions by their sequence number, so iterating
// the id index walks them oldest first.
func decisionsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableDecisions, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.UintFieldIndex{Field: "Seq"}},
	}}
}

func prioritiesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TablePriorities, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("JobID")}}
}

func queueTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableQueue, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("JobID")}}
}

func serversTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableServers, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("ID")}}
}

func demandMarksTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableDemandMarks, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("Leaf")}}
}
