package budgets

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// FuzzLedger decodes a ledger configuration and a sequence of operations
// from the input, runs them on a Ledger and on the naive refLedger, and
// fails on the first difference.
//
// Input: 3 header bytes (bucket 1-90 s, retention 1-65535 s rounded up to
// buckets, base time before or after 1970), then 5 bytes per operation:
// kind, leaf, a signed 16-bit time offset in 7-second steps, and an amount
// (254 means -1, 255 means 2^32-1). Span writes take their GPUs from the
// leaf byte's high bits (-1 if the amount byte is 254) and last amount × 13 s.
func FuzzLedger(f *testing.F) {
	f.Add([]byte{59, 100, 0, 0, 0, 0, 0, 5, 3, 1, 0, 10, 7, 6, 0, 0, 0, 9})
	f.Add([]byte{0, 3, 1, 0, 0, 0, 0, 255, 0, 0, 0, 1, 255, 6, 0, 0, 0, 200})
	f.Fuzz(runLedgerOps)
}

// runLedgerOps is FuzzLedger's body.
func runLedgerOps(t *testing.T, data []byte) {
	{
		if len(data) < 3 {
			return
		}
		bucket := time.Duration(1+int(data[0])%90) * time.Second
		retention := time.Duration(1+int(binary.LittleEndian.Uint16([]byte{data[1], data[2] & 0x7f}))) * time.Second
		base := t0
		if data[2]&0x80 != 0 {
			base = time.Unix(-1_000_000_007, 0)
		}
		l := NewLedger(LedgerConfig{Bucket: bucket, Retention: retention})
		r := newRefLedger(bucket, retention)
		leaves := []string{"a", "b/c", "d"}
		ops := data[3:]
		for len(ops) >= 5 {
			op := ops[:5]
			ops = ops[5:]
			leaf := leaves[int(op[1])%len(leaves)]
			at := base.Add(time.Duration(int16(binary.LittleEndian.Uint16(op[2:4]))) * 7 * time.Second)
			amount := int64(op[4])
			switch op[4] {
			case 254:
				amount = -1
			case 255:
				amount = math.MaxUint32
			}
			switch op[0] % 10 {
			case 0, 1, 2, 3, 4:
				q := 0
				write := l.charge
				if op[0]%10 >= 3 {
					q, write = 1, l.addDemand
				}
				err := write(leaf, at, amount)
				if want := r.write(leaf, at, amount, q); !sameError(err, want) {
					t.Fatalf("write(%s, %v, %d, q%d) err = %v, want %v", leaf, at.Unix(), amount, q, err, want)
				}
			case 5:
				l.Prune(at)
				r.prune(at)
			case 6:
				to := at.Add(time.Duration(op[4]) * 97 * time.Second)
				if err := compareLedgers(l, r, []string{leaf}, [][2]time.Time{{at, to}}); err != nil {
					t.Fatal(err)
				}
			case 7:
				enc, err := l.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				var m Ledger
				if err := m.UnmarshalBinary(enc); err != nil {
					t.Fatalf("round trip: %v", err)
				}
				l = &m
			case 8, 9:
				gpus, end := int64(op[1]>>2), at.Add(time.Duration(op[4])*13*time.Second)
				if op[4] == 254 {
					gpus = -1
				}
				q, write := 0, l.ChargeSpan
				if op[0]%10 == 9 {
					q, write = 1, l.AddDemandSpan
				}
				err := write(leaf, at, end, gpus)
				if want := r.writeSpan(leaf, at, end, gpus, q); !sameError(err, want) {
					t.Fatalf("span(%s, %v, %v, %d, q%d) err = %v, want %v", leaf, at.Unix(), end.Unix(), gpus, q, err, want)
				}
			}
		}
		var windows [][2]time.Time
		for k := -4; k <= 4; k++ {
			from := base.Add(time.Duration(k) * retention / 2)
			windows = append(windows, [2]time.Time{from, from.Add(retention)}, [2]time.Time{from, from.Add(bucket*3 + time.Second)})
		}
		windows = append(windows, [2]time.Time{base.Add(-time.Hour * 24 * 365), base.Add(time.Hour * 24 * 365)})
		if err := compareLedgers(l, r, leaves, windows); err != nil {
			t.Fatal(err)
		}
	}
}
