package budgets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ledgerMagic starts every encoded ledger; the byte after it is the format version.
const (
	ledgerMagic   = "ALDG"
	ledgerVersion = 1
)

// ErrCorruptLedger is wrapped by every error UnmarshalBinary returns.
var ErrCorruptLedger = errors.New("corrupt ledger encoding")

// MarshalBinary encodes the ledger compactly for raft snapshots: the
// configuration, horizon and drop counters, then per leaf (sorted by path)
// the retained buckets of each series, run-length and delta encoded as
// varints, so steady or idle usage costs a few bytes per leaf.
//
// Layout (all integers varints): magic "ALDG", version 1, bucket seconds,
// span, flags (1: written, 2: floor set), head, floor, dropped, dropped
// GPU-seconds, leaf count, then per leaf: path length, path, and for charged
// then demand a count (0: empty) followed by the first bucket and the
// (repeat, delta) pairs: repeat the previous value `repeat` times, then
// append previous+delta.
func (l *Ledger) MarshalBinary() ([]byte, error) {
	buf := make([]byte, 0, 64)
	buf = append(buf, ledgerMagic...)
	buf = binary.AppendUvarint(buf, ledgerVersion)
	buf = binary.AppendUvarint(buf, uint64(l.bucketSec))
	buf = binary.AppendUvarint(buf, uint64(l.span))
	var flags uint64
	if l.written {
		flags |= 1
	}
	if l.floor != math.MinInt64 {
		flags |= 2
	}
	buf = binary.AppendUvarint(buf, flags)
	buf = binary.AppendVarint(buf, l.head)
	buf = binary.AppendVarint(buf, l.floor)
	buf = binary.AppendUvarint(buf, uint64(l.dropped))
	buf = binary.AppendUvarint(buf, uint64(l.droppedSeconds))
	paths := l.Leaves()
	buf = binary.AppendUvarint(buf, uint64(len(paths)))
	for _, p := range paths {
		buf = binary.AppendUvarint(buf, uint64(len(p)))
		buf = append(buf, p...)
		ls := l.leaves[p]
		buf = l.appendSeries(buf, &ls.charged)
		buf = l.appendSeries(buf, &ls.demand)
	}
	return buf, nil
}

func (l *Ledger) appendSeries(buf []byte, s *series) []byte {
	if s.empty() || s.last < l.floor {
		return binary.AppendUvarint(buf, 0)
	}
	start := max(l.floor, (s.hb-l.nb+1)*blockLen)
	buf = binary.AppendUvarint(buf, uint64(s.last-start+1))
	buf = binary.AppendVarint(buf, start)
	e := runEncoder{buf: buf}
	// Block by block: a block whose sum (from the block prefixes) is zero is
	// a run of zeros, without reading its buckets; the others are read
	// straight from the ring. Most of a ring is empty or steady.
	for b := floorDiv(start, blockLen); b <= floorDiv(s.last, blockLen); b++ {
		lo, hi := max(start, b*blockLen), min(s.last, b*blockLen+blockLen-1)
		slot := floorMod(b, l.nb)
		end := s.total
		if b < s.hb {
			end = s.cum[floorMod(b+1, l.nb)]
		}
		if end == s.cum[slot] {
			e.repeat(0, hi-lo+1)
			continue
		}
		blk := s.vals[slot*blockLen : (slot+1)*blockLen]
		for _, v := range blk[floorMod(lo, blockLen) : floorMod(hi, blockLen)+1] {
			if int64(v) == e.prev {
				e.run++ // the common case, kept inline
				continue
			}
			e.repeat(int64(v), 1)
		}
	}
	return binary.AppendUvarint(e.buf, uint64(e.run))
}

// runEncoder writes a series as (repeat, delta) pairs: values equal to the
// previous one extend the current run; a new value closes it.
type runEncoder struct {
	buf       []byte
	prev, run int64
}

// repeat appends n copies of v.
func (e *runEncoder) repeat(v, n int64) {
	if n <= 0 {
		return
	}
	if v != e.prev {
		e.buf = binary.AppendUvarint(e.buf, uint64(e.run))
		e.buf = binary.AppendVarint(e.buf, v-e.prev)
		e.prev, e.run = v, 0
		n--
	}
	e.run += n
}

// UnmarshalBinary replaces the ledger with one encoded by MarshalBinary. On
// error, which wraps ErrCorruptLedger, the ledger is unchanged.
func (l *Ledger) UnmarshalBinary(data []byte) error {
	d := decoder{buf: data}
	if len(data) < len(ledgerMagic) || string(data[:len(ledgerMagic)]) != ledgerMagic {
		return fmt.Errorf("%w: does not start with %q", ErrCorruptLedger, ledgerMagic)
	}
	d.buf = d.buf[len(ledgerMagic):]
	if v := d.uvarint(); d.err == nil && v != ledgerVersion {
		return fmt.Errorf("%w: format version %d, want %d", ErrCorruptLedger, v, ledgerVersion)
	}
	bs, span := d.uvarint(), d.uvarint()
	if d.err == nil && (bs < 1 || bs > math.MaxInt32 || span < 1 || span > maxRetentionBuckets) {
		return fmt.Errorf("%w: bucket %ds and span %d buckets: want bucket in [1, %d] and span in [1, %d]",
			ErrCorruptLedger, bs, span, math.MaxInt32, maxRetentionBuckets)
	}
	n := newLedger(int64(bs), int64(span))
	flags := d.uvarint()
	n.written = flags&1 != 0
	head, floor := d.varint(), d.varint()
	if flags&1 != 0 {
		n.head = head
	}
	if flags&2 != 0 {
		n.floor = floor
	}
	n.dropped, n.droppedSeconds = int64(d.uvarint()), int64(d.uvarint())
	if d.err != nil {
		return d.err
	}
	if err := n.checkHeader(flags); err != nil {
		return err
	}
	count := d.uvarint()
	var prevPath string
	for i := uint64(0); d.err == nil && i < count; i++ {
		p := d.bytes(d.uvarint())
		if d.err == nil && i > 0 && p <= prevPath {
			return fmt.Errorf("%w: leaf %q after %q: paths must be unique and sorted", ErrCorruptLedger, p, prevPath)
		}
		ls := &leafSeries{}
		if err := n.decodeSeries(&d, &ls.charged); err != nil {
			return err
		}
		if err := n.decodeSeries(&d, &ls.demand); err != nil {
			return err
		}
		if !n.retained(ls) {
			return fmt.Errorf("%w: leaf %q holds no buckets", ErrCorruptLedger, p)
		}
		n.leaves[p], prevPath = ls, p
	}
	if d.err != nil {
		return d.err
	}
	if len(d.buf) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptLedger, len(d.buf))
	}
	*l = *n
	return nil
}

func (l *Ledger) checkHeader(flags uint64) error {
	if flags > 3 || flags == 1 {
		return fmt.Errorf("%w: flags %d: want 0, 2 or 3", ErrCorruptLedger, flags)
	}
	if l.dropped < 0 || l.droppedSeconds < 0 {
		return fmt.Errorf("%w: negative drop counters", ErrCorruptLedger)
	}
	if l.written && (l.head < -l.bucketLimit() || l.head > l.bucketLimit() || l.floor < l.head-l.span+1) {
		return fmt.Errorf("%w: horizon %d behind head %d by more than %d buckets", ErrCorruptLedger, l.floor, l.head, l.span)
	}
	if l.floor != math.MinInt64 && (l.floor < -l.bucketLimit() || l.floor > l.bucketLimit()) {
		return fmt.Errorf("%w: horizon %d out of range", ErrCorruptLedger, l.floor)
	}
	return nil
}

// decodeSeries reads one series; every bucket must lie in [floor, head] and
// the last one must be positive (it is the newest write).
func (l *Ledger) decodeSeries(d *decoder, s *series) error {
	count := d.uvarint()
	if d.err != nil || count == 0 {
		return d.err
	}
	start := d.varint()
	if d.err != nil {
		return d.err
	}
	if !l.written || count > uint64(l.span) || start < l.floor || start > l.head-int64(count)+1 {
		return fmt.Errorf("%w: series of %d buckets from %d outside the retained range [%d, %d]",
			ErrCorruptLedger, count, start, l.floor, l.head)
	}
	var prev int64
	j, end := start, start+int64(count)
	for d.err == nil { // runs and values alternate, starting and ending with a run
		run := d.uvarint()
		if d.err == nil && run > uint64(end-j) {
			return fmt.Errorf("%w: run of %d past the series end", ErrCorruptLedger, run)
		}
		for k := int64(0); k < int64(run) && prev > 0; k++ {
			s.add(j+k, prev, l.nb)
		}
		j += int64(run)
		if j == end {
			break
		}
		v := prev + d.varint()
		if d.err == nil && (v < 0 || v > maxBucketValue) {
			return fmt.Errorf("%w: bucket value %d outside [0, %d]", ErrCorruptLedger, v, int64(maxBucketValue))
		}
		if v > 0 {
			s.add(j, v, l.nb)
		}
		prev = v
		j++
	}
	if d.err == nil && (s.empty() || s.last != end-1) {
		return fmt.Errorf("%w: series must end with a positive bucket", ErrCorruptLedger)
	}
	return d.err
}

type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or malformed %s", ErrCorruptLedger, what)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.buf)
	if k <= 0 {
		d.fail("unsigned varint")
		return 0
	}
	d.buf = d.buf[k:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Varint(d.buf)
	if k <= 0 {
		d.fail("varint")
		return 0
	}
	d.buf = d.buf[k:]
	return v
}

func (d *decoder) bytes(n uint64) string {
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.buf)) {
		d.fail("path")
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}
