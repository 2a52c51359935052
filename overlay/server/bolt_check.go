package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// ErrDamagedStore: the raft store in data_dir is damaged (truncated,
// overwritten, altered or missing under state this server had). The server
// refuses to start on it; the error says what was found and how to recover.
var ErrDamagedStore = errors.New("raft store is damaged")

// The on-disk layout of a bbolt file (go.etcd.io/bbolt page.go and db.go,
// format version 2), read here with ReadAt before bbolt maps the file:
// bbolt trusts every count and page ID it reads, so a damaged file makes it
// read outside the map (a fault), panic ("cannot free page 0 or 1") or
// allocate what a random count says (a 24 GB freelist). checkBoltFile
// refuses such a file first; nothing it allocates exceeds the file's size.
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeader     = 16 // id u64, flags u16, count u16, overflow u32
	boltElement        = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	boltBucketHeader   = 16 // root pgid u64, sequence u64
	boltBranchPage     = 0x01
	boltLeafPage       = 0x02
	boltMetaPage       = 0x04
	boltFreelistPage   = 0x10
	boltBucketLeafFlag = 0x01
	boltNoFreelist     = ^uint64(0)
	boltMaxDepth       = 64 // a B+tree of 4 KiB pages this deep holds far more than any raft log
)

// boltMeta is the part of a meta page the check uses.
type boltMeta struct {
	pageSize uint32
	root     uint64 // root bucket's page
	freelist uint64
	pgid     uint64 // high water mark: pages in use are below it
	txid     uint64
}

// checkBoltFile checks the structure of the bbolt file at path without
// mapping it: both meta pages and their checksums, the high water mark
// against the file's size, the freelist's count, and every page reachable
// from the root bucket (IDs, types, element bounds). A missing file is not
// an error here (the caller decides whether one should exist).
func checkBoltFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%w: open %s: %v", ErrDamagedStore, path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: stat %s: %v", ErrDamagedStore, path, err)
	}
	c := &boltChecker{f: f, size: fi.Size()}
	if err := c.check(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamagedStore, path, err)
	}
	return nil
}

type boltChecker struct {
	f       io.ReaderAt
	size    int64
	meta    boltMeta
	visited map[uint64]bool
}

func (c *boltChecker) check() error {
	if c.size == 0 {
		return errors.New("the file is empty (0 bytes)")
	}
	// Meta page 0 names the page size; if it is unreadable, try the usual
	// sizes for meta page 1 so that the message can say which page is bad.
	m0, err0 := c.readMeta(0, 0)
	var m1 boltMeta
	var err1 error
	if err0 == nil {
		m1, err1 = c.readMeta(1, m0.pageSize)
	} else {
		err1 = errors.New("no page size found")
		for _, ps := range []uint32{4096, 8192, 16384, 65536, 1024, 2048, 32768} {
			if m1, err1 = c.readMeta(1, ps); err1 == nil {
				break
			}
		}
	}
	switch {
	case err0 != nil && err1 != nil:
		return fmt.Errorf("both meta pages are invalid (page 0: %v; page 1: %v)", err0, err1)
	case err0 != nil:
		return fmt.Errorf("meta page 0 is invalid (%v): bbolt would fall back to the older meta page 1 and drop the last committed writes", err0)
	case err1 != nil:
		return fmt.Errorf("meta page 1 is invalid (%v): bbolt would fall back to the older meta page 0 and drop the last committed writes", err1)
	}
	c.meta = m0
	if m1.txid > m0.txid {
		c.meta = m1
	}
	for i, m := range []boltMeta{m0, m1} {
		if end := int64(m.pgid) * int64(m.pageSize); m.pgid > uint64(c.size) || end > c.size {
			return fmt.Errorf("meta page %d says %d pages (%d bytes) are in use but the file has %d bytes: it was truncated", i, m.pgid, end, c.size)
		}
		if m.root < 2 || m.root >= m.pgid {
			return fmt.Errorf("meta page %d: root page %d is outside 2..%d", i, m.root, m.pgid-1)
		}
		if m.freelist != boltNoFreelist && (m.freelist < 2 || m.freelist >= m.pgid) {
			return fmt.Errorf("meta page %d: freelist page %d is outside 2..%d", i, m.freelist, m.pgid-1)
		}
	}
	if c.meta.freelist != boltNoFreelist {
		if err := c.checkFreelist(c.meta.freelist); err != nil {
			return err
		}
	}
	c.visited = map[uint64]bool{}
	return c.walk(c.meta.root, 0)
}

func (c *boltChecker) readMeta(id uint64, pageSize uint32) (boltMeta, error) {
	ps := int64(pageSize)
	if id == 0 {
		ps = 0
	}
	buf := make([]byte, boltPageHeader+64)
	if _, err := c.f.ReadAt(buf, int64(id)*ps); err != nil {
		return boltMeta{}, fmt.Errorf("cannot read it: %v", err)
	}
	le := binary.LittleEndian
	if le.Uint16(buf[8:]) != boltMetaPage {
		return boltMeta{}, fmt.Errorf("page type %#x, want a meta page", le.Uint16(buf[8:]))
	}
	meta := buf[boltPageHeader:]
	if le.Uint32(meta[0:]) != boltMagic {
		return boltMeta{}, errors.New("bad magic number")
	}
	if v := le.Uint32(meta[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(meta[:56])
	if sum := le.Uint64(meta[56:]); sum != h.Sum64() {
		return boltMeta{}, errors.New("checksum mismatch")
	}
	m := boltMeta{pageSize: le.Uint32(meta[8:]), root: le.Uint64(meta[16:]), freelist: le.Uint64(meta[32:]),
		pgid: le.Uint64(meta[40:]), txid: le.Uint64(meta[48:])}
	if m.pageSize < 512 || m.pageSize > 1<<16 || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, fmt.Errorf("page size %d is not a power of two from 512 to 65536", m.pageSize)
	}
	if pageSize != 0 && m.pageSize != pageSize {
		return boltMeta{}, fmt.Errorf("page size %d differs from meta page 0's %d", m.pageSize, pageSize)
	}
	if m.pgid < 4 {
		return boltMeta{}, fmt.Errorf("high water mark %d is below the 4 pages of an empty file", m.pgid)
	}
	return m, nil
}

// readPage reads page id with its overflow pages, checking that it lies
// below the high water mark and that its header names it and its type.
func (c *boltChecker) readPage(id uint64, wantFlags uint16) ([]byte, error) {
	ps := int64(c.meta.pageSize)
	if id < 2 || id >= c.meta.pgid {
		return nil, fmt.Errorf("page %d is outside the pages in use (2..%d)", id, c.meta.pgid-1)
	}
	head := make([]byte, boltPageHeader)
	if _, err := c.f.ReadAt(head, int64(id)*ps); err != nil {
		return nil, fmt.Errorf("page %d: cannot read it: %v", id, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(head); got != id {
		return nil, fmt.Errorf("page %d: its header names page %d (overwritten)", id, got)
	}
	if fl := le.Uint16(head[8:]); fl&wantFlags == 0 || fl&^(boltBranchPage|boltLeafPage|boltFreelistPage) != 0 {
		return nil, fmt.Errorf("page %d: type %#x, want %#x (overwritten)", id, fl, wantFlags)
	}
	overflow := uint64(le.Uint32(head[12:]))
	if id+overflow >= c.meta.pgid {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the pages in use (%d)", id, overflow, c.meta.pgid)
	}
	buf := make([]byte, int64(overflow+1)*ps)
	if _, err := c.f.ReadAt(buf, int64(id)*ps); err != nil {
		return nil, fmt.Errorf("page %d: cannot read it: %v", id, err)
	}
	return buf, nil
}

func (c *boltChecker) checkFreelist(id uint64) error {
	p, err := c.readPage(id, boltFreelistPage)
	if err != nil {
		return fmt.Errorf("freelist: %v", err)
	}
	le := binary.LittleEndian
	count, at := uint64(le.Uint16(p[10:])), uint64(boltPageHeader)
	if count == 0xFFFF { // overflow: the real count is the first element
		count, at = le.Uint64(p[boltPageHeader:]), boltPageHeader+8
	}
	if room := (uint64(len(p)) - at) / 8; count > room {
		return fmt.Errorf("freelist page %d counts %d free pages but has room for %d (overwritten)", id, count, room)
	}
	for i := uint64(0); i < count; i++ {
		if free := le.Uint64(p[at+8*i:]); free < 2 || free >= c.meta.pgid {
			return fmt.Errorf("freelist page %d lists page %d, outside 2..%d (overwritten)", id, free, c.meta.pgid-1)
		}
	}
	return nil
}

// walk checks the B+tree of a bucket whose root is page id.
func (c *boltChecker) walk(id uint64, depth int) error {
	if depth > boltMaxDepth {
		return fmt.Errorf("page %d: tree deeper than %d levels (a cycle?)", id, boltMaxDepth)
	}
	if c.visited[id] {
		return fmt.Errorf("page %d is reached twice", id)
	}
	c.visited[id] = true
	p, err := c.readPage(id, boltBranchPage|boltLeafPage)
	if err != nil {
		return err
	}
	if binary.LittleEndian.Uint16(p[8:])&boltBranchPage != 0 {
		return c.branch(id, p, depth)
	}
	return c.leaf(fmt.Sprintf("page %d", id), p, depth)
}

func (c *boltChecker) branch(id uint64, p []byte, depth int) error {
	le := binary.LittleEndian
	n := int(le.Uint16(p[10:]))
	if boltPageHeader+n*boltElement > len(p) {
		return fmt.Errorf("page %d: %d elements do not fit in %d bytes (overwritten)", id, n, len(p))
	}
	for i := 0; i < n; i++ {
		e := boltPageHeader + i*boltElement
		pos, ksize := uint64(le.Uint32(p[e:])), uint64(le.Uint32(p[e+4:]))
		if uint64(e)+pos+ksize > uint64(len(p)) {
			return fmt.Errorf("page %d: key %d runs past the page (overwritten)", id, i)
		}
		if err := c.walk(le.Uint64(p[e+8:]), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// leaf checks a leaf page (or an inline bucket's page) and the buckets it
// holds.
func (c *boltChecker) leaf(name string, p []byte, depth int) error {
	le := binary.LittleEndian
	if len(p) < boltPageHeader {
		return fmt.Errorf("%s: shorter than a page header", name)
	}
	n := int(le.Uint16(p[10:]))
	if boltPageHeader+n*boltElement > len(p) {
		return fmt.Errorf("%s: %d elements do not fit in %d bytes (overwritten)", name, n, len(p))
	}
	for i := 0; i < n; i++ {
		e := boltPageHeader + i*boltElement
		flags, pos := le.Uint32(p[e:]), uint64(le.Uint32(p[e+4:]))
		ksize, vsize := uint64(le.Uint32(p[e+8:])), uint64(le.Uint32(p[e+12:]))
		end := uint64(e) + pos + ksize + vsize
		if end > uint64(len(p)) {
			return fmt.Errorf("%s: element %d runs past the page (overwritten)", name, i)
		}
		if flags&boltBucketLeafFlag == 0 {
			continue
		}
		v := p[uint64(e)+pos+ksize : end]
		if len(v) < boltBucketHeader {
			return fmt.Errorf("%s: bucket %d has a %d-byte header (overwritten)", name, i, len(v))
		}
		if root := le.Uint64(v); root != 0 {
			if err := c.walk(root, depth+1); err != nil {
				return err
			}
		} else if err := c.leaf(name+" inline bucket", v[boltBucketHeader:], depth+1); err != nil {
			return err
		}
	}
	return nil
}
