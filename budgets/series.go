package budgets

import "math"

// blockLen is the number of buckets per block of a series. Window sums read
// two block prefixes plus at most blockLen/2 buckets at each end of the
// window, so a sum costs the same for a 1-hour and a 7-day window. 16 keeps
// the per-block prefix array at 1/8 of the bucket ring (12.5% memory) while
// bounding the scan at 8 buckets per end.
const blockLen = 16

// maxBucketValue is the most a single bucket of one leaf can hold. Buckets
// are uint32 so that 1,000 leaves × 14 days of 1-minute buckets fit in well
// under 256 MiB; with 1-minute buckets the limit is 71 million GPUs.
const maxBucketValue = math.MaxUint32

// series is one quantity (charged or demand) of one leaf: a ring of buckets
// grouped in blocks, with a running prefix sum per block.
//
// The ring holds absolute blocks [hb-nb+1, hb]; block b lives in slot
// floorMod(b, nb). cum[slot(b)] is the sum of every value ever written to
// blocks before b since the series was created (blocks recycled out of the
// ring keep contributing to it), and total is that sum through hb. So for
// two buckets x < y inside the ring, prefix(y)-prefix(x) is exactly the sum
// of buckets [x, y).
type series struct {
	vals  []uint32 // nb*blockLen buckets; nil until the first write
	cum   []int64  // per block slot
	total int64
	hb    int64 // head block: newest block in the ring
	last  int64 // newest bucket written (always holds a positive value)
}

func (s *series) empty() bool { return s.vals == nil }

// value returns bucket j's stored value (0 outside the ring or for a nil series).
func (s *series) value(j, nb int64) int64 {
	if s == nil || s.vals == nil {
		return 0
	}
	b := floorDiv(j, blockLen)
	if b > s.hb || b <= s.hb-nb {
		return 0
	}
	return int64(s.vals[floorMod(b, nb)*blockLen+floorMod(j, blockLen)])
}

// canAdd reports whether v more fits in bucket j.
func (s *series) canAdd(j, v, nb int64) bool {
	return v <= maxBucketValue-s.value(j, nb)
}

// add adds v > 0 to bucket j. The caller has checked canAdd and that j is not
// older than the ring's oldest block (the ledger's retention guarantees it).
func (s *series) add(j, v, nb int64) {
	b := floorDiv(j, blockLen)
	if s.vals == nil {
		s.vals = make([]uint32, nb*blockLen)
		s.cum = make([]int64, nb)
		s.hb, s.last = b, j
	}
	if b > s.hb {
		s.advance(b, nb)
	}
	slot := floorMod(b, nb)
	s.vals[slot*blockLen+floorMod(j, blockLen)] += uint32(v)
	// A late write shifts the prefix of every later block in the ring.
	for k := b + 1; k <= s.hb; k++ {
		s.cum[floorMod(k, nb)] += v
	}
	s.total += v
	if j > s.last {
		s.last = j
	}
}

// advance moves the head block to b > hb, recycling the slots of the blocks
// that fall out of the ring.
func (s *series) advance(b, nb int64) {
	if b-s.hb >= nb {
		clear(s.vals)
		for i := range s.cum {
			s.cum[i] = s.total
		}
		s.hb = b
		return
	}
	for k := s.hb + 1; k <= b; k++ {
		slot := floorMod(k, nb)
		clear(s.vals[slot*blockLen : (slot+1)*blockLen])
		s.cum[slot] = s.total
	}
	s.hb = b
}

// prefix returns the running sum of buckets before x, for x inside the ring
// or exactly one past its end.
func (s *series) prefix(x, nb int64) int64 {
	b := floorDiv(x, blockLen)
	if b > s.hb {
		return s.total
	}
	slot := floorMod(b, nb)
	off := floorMod(x, blockLen)
	blk := s.vals[slot*blockLen : (slot+1)*blockLen]
	if off <= blockLen/2 {
		var sum int64
		for _, v := range blk[:off] {
			sum += int64(v)
		}
		return s.cum[slot] + sum
	}
	end := s.total
	if b < s.hb {
		end = s.cum[floorMod(b+1, nb)]
	}
	var sum int64
	for _, v := range blk[off:] {
		sum += int64(v)
	}
	return end - sum
}

// sum returns the sum of buckets [a, b).
func (s *series) sum(a, b, nb int64) int64 {
	if s.vals == nil {
		return 0
	}
	a = max(a, (s.hb-nb+1)*blockLen)
	b = min(b, (s.hb+1)*blockLen)
	if a >= b {
		return 0
	}
	return s.prefix(b, nb) - s.prefix(a, nb)
}

// sizeBytes is the memory held by the series' arrays.
func (s *series) sizeBytes() int64 {
	return int64(cap(s.vals))*4 + int64(cap(s.cum))*8
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return m
}
