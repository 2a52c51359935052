package policy

// capacity is the placement model: for each GPU model, the usable nodes
// bucketed by available GPUs, so that a best-fit placement (the node with the
// fewest available GPUs that still fits the ask, as Nomad's bin packing
// prefers) costs O(max GPUs per node) instead of a scan of every node.
//
// avail(node) = healthy GPUs not held by anyone + GPUs held by unallocated
// jobs (Nomad's own preemption evicts those for any pending allocated job).
// A node is usable when it is eligible, healthy, not under a Nomad drain and
// not reserved.
type capacity struct {
	avail  []int32     // by node; may leave [0, max GPUs] transiently
	model  []int32     // by node: model index
	usable []bool      // by node
	bucket [][][]int32 // [model][avail] -> nodes
	slot   []int32     // by node: index in its bucket
	maxCap []int32     // by class: the most healthy GPUs of any node not draining
	sumCap []int64     // by class: the healthy GPUs of every node not draining
	top    []int32     // by class: no bucket above it holds a node
	undo   []undoStep
}

type undoStep struct{ node, delta int32 }

// reset empties the model for nodes of models classes; with nodes false it
// keeps each node's model and each class's maxCap and sumCap, which depend
// on the nodes alone (Decider.buildCapacity fills them when they changed).
func (c *capacity) reset(nodes, models, maxGPUs int, clearNodes bool) {
	c.avail = resize(c.avail, nodes)
	c.usable = resize(c.usable, nodes)
	c.slot = resize(c.slot, nodes)
	if clearNodes {
		c.model = resize(c.model, nodes)
		c.maxCap = resize(c.maxCap, models)
		c.sumCap = resize(c.sumCap, models)
		clear(c.sumCap)
		clear(c.maxCap)
	}
	c.top = resize(c.top, models)
	clear(c.top)
	if cap(c.bucket) < models {
		c.bucket = make([][][]int32, models)
	}
	c.bucket = c.bucket[:models]
	for m := range c.bucket {
		if cap(c.bucket[m]) < maxGPUs+1 {
			c.bucket[m] = make([][]int32, maxGPUs+1)
		}
		c.bucket[m] = c.bucket[m][:maxGPUs+1]
		for a := range c.bucket[m] {
			c.bucket[m][a] = c.bucket[m][a][:0]
		}
	}
	c.undo = c.undo[:0]
}

// add makes node usable with avail GPUs available.
func (c *capacity) add(node int32, avail int32) {
	c.usable[node] = true
	c.avail[node] = avail
	c.link(node)
}

// link files a usable node in the bucket of its availability, keeping top
// above it.
func (c *capacity) link(node int32) {
	m := c.model[node]
	i := c.index(node)
	c.top[m] = max(c.top[m], i)
	b := &c.bucket[m][i]
	c.slot[node] = int32(len(*b))
	*b = append(*b, node)
}

// remove takes a usable node out of the model (it was reserved, say).
func (c *capacity) remove(node int32) {
	if !c.usable[node] {
		return
	}
	c.unlink(node)
	c.usable[node] = false
}

func (c *capacity) unlink(node int32) {
	b := &c.bucket[c.model[node]][c.index(node)]
	i := c.slot[node]
	last := (*b)[len(*b)-1]
	(*b)[i] = last
	c.slot[last] = i
	*b = (*b)[:len(*b)-1]
}

// change moves delta GPUs into (positive) or out of (negative) a usable
// node's availability, recording the step for rollback.
func (c *capacity) change(node, delta int32) {
	if !c.usable[node] || delta == 0 {
		return
	}
	c.unlink(node)
	c.avail[node] += delta
	c.link(node)
	c.undo = append(c.undo, undoStep{node, delta})
}

// index is the bucket of a node: its availability clamped to the buckets
// (it can leave them when allocations hold GPUs that turned unhealthy).
func (c *capacity) index(node int32) int32 {
	return max(0, min(c.avail[node], int32(len(c.bucket[c.model[node]])-1)))
}

// bestFit returns the usable node of class c with the fewest available GPUs
// that still has gpus available (at most below), and its availability; -1
// when none.
func (c *capacity) bestFit(cl int32, gpus, below int32) (int32, int32) {
	bk := c.bucket[cl]
	for c.top[cl] > 0 && len(bk[c.top[cl]]) == 0 {
		c.top[cl]-- // lazily lower the bound as nodes fill up
	}
	for a := max(gpus, 0); a <= c.top[cl] && a < below; a++ {
		if len(bk[a]) > 0 {
			return bk[a][0], a
		}
	}
	return -1, below
}

// maxAvail is the most GPUs available on any usable node.
func (c *capacity) maxAvail() int32 {
	most := int32(0)
	for cl, bk := range c.bucket {
		for a := c.top[cl]; a > most; a-- {
			if len(bk[a]) > 0 {
				most = a
				break
			}
		}
	}
	return most
}

// mark returns a rollback point; rollback undoes every change after it.
func (c *capacity) mark() int { return len(c.undo) }

func (c *capacity) rollback(to int) {
	for i := len(c.undo) - 1; i >= to; i-- {
		s := c.undo[i]
		c.change(s.node, -s.delta)
	}
	c.undo = c.undo[:to]
}

// resize returns s with length n, reusing its memory when it has room
// (the contents are whatever was there); it grows by a quarter more than
// asked, so a slice that follows a slowly growing count is not
// reallocated each time.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
