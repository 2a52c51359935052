package policy

import (
	"slices"
	"strings"
)

// pendingKey sorts waiting allocated jobs: partially placed jobs first
// (their missing allocations come before any pending job), then by the leaf's
// fair-share position, then by meta priority (higher first) within a leaf,
// then by submit time, then by job ID. Meta priority is compared only between
// jobs of the same leaf because the leaf position is compared first (rule 8).
// The first three are packed into rank so that most comparisons are one
// integer comparison.
type pendingKey struct {
	rank   uint64 // !partial<<63 | leafPos<<32 | queueRank
	submit int64
	job    int32
}

func (k pendingKey) partial() bool { return k.rank>>63 == 0 }

func (d *Decider) compareKeys(a, b pendingKey) int {
	switch {
	case a.rank != b.rank:
		if a.rank < b.rank {
			return -1
		}
		return 1
	case a.submit != b.submit:
		if a.submit < b.submit {
			return -1
		}
		return 1
	}
	return strings.Compare(d.jp[a.job].ID, d.jp[b.job].ID)
}

func (d *Decider) keyOf(j int32, partial bool) pendingKey {
	job := d.jp[j]
	rank := uint64(d.leafPos[d.jobs[j].leaf])<<32 | uint64(queueRank(job))
	if !partial {
		rank |= 1 << 63
	}
	return pendingKey{rank: rank, submit: job.SubmitTime.UnixNano(), job: j}
}

// orderPending sorts every waiting allocated job and numbers the pending
// ones: position p (1-based) among pending jobs.
func (d *Decider) orderPending() {
	d.order = d.order[:0]
	if d.tl != nil {
		d.mergePending()
		d.tailPositions()
		return
	}
	for j := range d.jobs {
		switch d.jobs[j].state {
		case jsPending:
			d.order = append(d.order, d.keyOf(int32(j), false))
		case jsPartial:
			d.order = append(d.order, d.keyOf(int32(j), true))
		}
	}
	slices.SortFunc(d.order, d.compareKeys)
	p := int32(0)
	for _, k := range d.order {
		if !k.partial() {
			p++
			d.jobs[k.job].position = p
		}
	}
}

// mergePending fills the order for an Incremental's snapshot: the queued
// jobs come in rank order (tail.queuedOrder, which is the pending order:
// each is pending), so only the other waiting jobs are sorted, and the two
// runs are merged.
func (d *Decider) mergePending() {
	t := d.tl
	for j := range d.jobs {
		if t.rank[j] != 0 {
			continue
		}
		switch d.jobs[j].state {
		case jsPending:
			d.order = append(d.order, d.keyOf(int32(j), false))
		case jsPartial:
			d.order = append(d.order, d.keyOf(int32(j), true))
		}
	}
	slices.SortFunc(d.order, d.compareKeys)
	others := len(d.order)
	for _, j := range t.queuedOrder {
		d.order = append(d.order, d.keyOf(j, false))
	}
	d.merge = append(d.merge[:0], d.order[:others]...)
	queued := d.order[others:]
	i, k, o := 0, 0, 0
	for i < len(d.merge) && k < len(queued) {
		if d.compareKeys(d.merge[i], queued[k]) <= 0 {
			d.order[o] = d.merge[i]
			i++
		} else {
			d.order[o] = queued[k]
			k++
		}
		o++
	}
	o += copy(d.order[o:], d.merge[i:])
	copy(d.order[o:], queued[k:]) // in place: o == others + k
}

// tailPositions numbers the pending jobs counting those an Incremental
// left out (tail.go): a job's position is the queued jobs before it, plus
// the other pending jobs before it (all read), plus one.
func (d *Decider) tailPositions() {
	t := d.tl
	t.qb = resize(t.qb, len(d.jobs))
	var others int32
	for _, k := range d.order {
		if k.partial() {
			continue
		}
		qb := t.rank[k.job] - 1
		if qb < 0 {
			qb = t.before(k.job)
		}
		t.qb[k.job] = qb
		d.jobs[k.job].position = qb + others + 1
		if t.rank[k.job] == 0 {
			others++
		}
	}
	t.total = t.queued + others
}

// pendingLevel is the pending-band level of position p (1-based) for a
// job of leaf leaf (an index of the tree's leaves). The band's top
// Levels() - K levels go one to a position, from the top down; every later
// position sits in the band's bottom K levels by its leaf's place in the
// fair-share order, one level to a leaf where there are no more leaves than
// K, else leaves grouped evenly (pendingTier), with K = min(leaves,
// Levels()/2):
//
//	level(p, l) = Pending.High - (p-1)         for p <= Levels() - K
//	level(p, l) = Pending.Low + pendingTier(l) otherwise
//
// Nomad retries blocked evaluations highest priority first, then first
// come, so jobs sharing a level are served in the order they came. With
// every later position on the band's bottom (as before), the jobs past the
// top 49 of a deep queue, the order being leaf by leaf, were served first
// come whatever their budgets' standing: on a heavy trace (allot sim, 2,048
// GPUs, lab/science/climate served 1.9x its share at the end) the budgets
// most served got most of their GPU time from placements made at the
// band's bottom (climate 70%), the least served little (3-15%). The order
// is leaf by leaf, so levels still never rise down it.
func (d *Decider) pendingLevel(p int32, leaf int32) int {
	r := d.cfg.Pending
	k := pendingTiers(r, len(d.leafPos))
	if int(p) <= r.Levels()-k {
		return r.High - (int(p) - 1)
	}
	pos := len(d.leafPos) - 1 // a budget gone from the tree: last
	if leaf >= 0 {
		pos = int(d.leafPos[leaf])
	}
	return r.Low + pendingTier(pos, len(d.leafPos), k)
}

// pendingTiers is K of pendingLevel: the band's bottom levels shared by
// leaf, min(leaves, Levels()/2), at least 1.
func pendingTiers(band Range, leaves int) int {
	return max(1, min(leaves, band.Levels()/2))
}

// pendingTier is the bottom level (0 = the band's bottom) of the leaf at
// position pos (0 = most owed) of n leaves, with k tiers: the first leaves
// highest, n/k leaves to a tier.
func pendingTier(pos, n, k int) int {
	if n <= 0 {
		return 0
	}
	return k - 1 - min(pos, n-1)*k/n
}

// victimPosition is where job v, now running, would sit in the pending
// order: 1 + the number of pending jobs sorting before it.
func (d *Decider) victimPosition(v int32) int32 {
	k := d.keyOf(v, false)
	i, _ := slices.BinarySearchFunc(d.order, k, d.compareKeys)
	p := int32(1)
	for _, o := range d.order[:i] {
		if !o.partial() {
			p++
		}
	}
	return p
}
