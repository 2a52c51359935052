package budgets

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// refAppendSeries is the obviously correct encoder MarshalBinary's block
// walk replaced: bucket by bucket through series.value.
func refAppendSeries(l *Ledger, buf []byte, s *series) []byte {
	if s.empty() || s.last < l.floor {
		return binary.AppendUvarint(buf, 0)
	}
	start := max(l.floor, (s.hb-l.nb+1)*blockLen)
	buf = binary.AppendUvarint(buf, uint64(s.last-start+1))
	buf = binary.AppendVarint(buf, start)
	var prev, run int64
	for j := start; j <= s.last; j++ {
		v := s.value(j, l.nb)
		if v == prev {
			run++
			continue
		}
		buf = binary.AppendUvarint(buf, uint64(run))
		buf = binary.AppendVarint(buf, v-prev)
		prev, run = v, 0
	}
	return binary.AppendUvarint(buf, uint64(run))
}

// The block walk must write exactly the bytes of the bucket-by-bucket
// encoder (snapshots on disk keep format version 1), on ledgers with gaps,
// late writes, steady and changing runs, pruned horizons and rings that
// wrapped.
func TestLedgerMarshalMatchesBucketByBucket(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		bucket := time.Duration(1+rng.IntN(90)) * time.Second
		retention := time.Duration(1+rng.IntN(400)) * bucket
		l := NewLedger(LedgerConfig{Bucket: bucket, Retention: retention})
		leaves := []string{"a", "b/c", "d"}
		now := t0
		for range 300 {
			leaf := leaves[rng.IntN(len(leaves))]
			at := now.Add(-time.Duration(rng.Int64N(int64(retention))))
			v := int64(rng.IntN(4)) * 60 // zero values leave holes
			switch rng.IntN(8) {
			case 0:
				now = now.Add(time.Duration(rng.Int64N(int64(retention))))
			case 1:
				l.Prune(now.Add(-time.Duration(rng.Int64N(int64(retention)))))
			case 2:
				_ = l.ChargeSpan(leaf, at, at.Add(time.Duration(rng.IntN(200))*bucket), int64(1+rng.IntN(8)))
			case 3, 4:
				_ = l.addDemand(leaf, at, v)
			default:
				_ = l.charge(leaf, at, v)
			}
		}
		got, err := l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		head, _ := splitLeaves(t, got, l)
		want := head
		for _, p := range l.Leaves() {
			want = binary.AppendUvarint(want, uint64(len(p)))
			want = append(want, p...)
			want = refAppendSeries(l, want, &l.leaves[p].charged)
			want = refAppendSeries(l, want, &l.leaves[p].demand)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: block walk encodes %d bytes, bucket by bucket %d, and they differ", seed, len(got), len(want))
		}
	}
}

// splitLeaves returns the header of an encoding up to and including the
// leaf count, re-encoded from the ledger, and checks it prefixes data.
func splitLeaves(t *testing.T, data []byte, l *Ledger) ([]byte, []byte) {
	t.Helper()
	empty := *l
	empty.leaves = nil
	hdr, err := empty.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	hdr = hdr[:len(hdr)-1] // drop the leaf count 0
	hdr = binary.AppendUvarint(hdr, uint64(len(l.Leaves())))
	if !bytes.HasPrefix(data, hdr) {
		t.Fatal("header differs")
	}
	return hdr, data[len(hdr):]
}
