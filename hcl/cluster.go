package hcl

import (
	"fmt"
	"math/big"
	"os"

	hcl2 "github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Cluster files describe the simulated cluster of `allot sim -cluster`:
//
//	pool "default" {
//	  nodes         = 120
//	  gpus_per_node = 8
//	  model         = "h100"   # optional, default "h100"
//	}
//	pool "a100" {
//	  nodes         = 8
//	  gpus_per_node = 8
//	  model         = "a100"
//	  node_pool     = "gpu"    # optional: the Nomad node pool, default the block's name
//	}
//
// A file holds one or more pool blocks and nothing else. Pools are kept in
// file order; the simulator names each pool's nodes <pool>-0, <pool>-1, ...

// Cluster is a decoded cluster file: its node pools, in file order.
type Cluster struct {
	Pools []ClusterPool
}

// ClusterPool is one pool block: Nodes identical nodes of GPUsPerNode GPUs
// of one Model.
type ClusterPool struct {
	Name        string
	Nodes       int
	GPUsPerNode int
	Model       string
	// NodePool is the Nomad node pool the nodes register in; "" is Name.
	NodePool string
	// Pos is where the pool is declared, "file:line:col" of its pool keyword.
	Pos string
}

// GPUs is the cluster's total GPU count.
func (c *Cluster) GPUs() int {
	n := 0
	for _, p := range c.Pools {
		n += p.Nodes * p.GPUsPerNode
	}
	return n
}

// Limits of a pool. They are the simulator's (sim.ClusterSpec.Validate):
// a node's GPUs are the bits of one 64-bit mask, and 100,000 nodes per pool
// is far beyond any cluster it is meant to model.
const (
	MaxPoolNodes   = 100000
	MaxGPUsPerNode = 64
	// DefaultModel is a pool's GPU model when the file names none.
	DefaultModel = "h100"
	// maxPoolName is the longest pool name Nomad accepts for a node pool.
	maxPoolName = 128
)

// Attribute and block names of a cluster file.
const (
	blockPool       = "pool"
	attrNodes       = "nodes"
	attrGPUsPerNode = "gpus_per_node"
	attrModel       = "model"
	attrNodePool    = "node_pool"
)

var poolAttrs = []string{attrNodes, attrGPUsPerNode, attrModel, attrNodePool}

const poolExample = `pool "default" { ... } setting nodes = 128 and gpus_per_node = 8`

// LoadCluster reads and decodes a cluster file. Problems with its content
// come back as Diagnostics; a file that cannot be read as a plain error.
func LoadCluster(path string) (*Cluster, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading cluster file: %w", err)
	}
	return ParseCluster(path, src)
}

// ParseCluster decodes the cluster file src, named name in diagnostics. It
// reports every problem of the file, sorted by position, as Diagnostics.
func ParseCluster(name string, src []byte) (*Cluster, error) {
	f, hds := hclsyntax.ParseConfig(src, name, hcl2.InitialPos)
	if hds.HasErrors() {
		ds := fromHCL(name, hds)
		sortDiagnostics(ds)
		return nil, ds
	}
	cd := &clusterDecoder{first: map[string]hcl2.Range{}}
	c := cd.file(f.Body.(*hclsyntax.Body))
	if len(cd.diags) > 0 {
		sortDiagnostics(cd.diags)
		return nil, cd.diags
	}
	return c, nil
}

// clusterDecoder collects every problem of one cluster file.
type clusterDecoder struct {
	diags Diagnostics
	first map[string]hcl2.Range // pool name -> its first declaration
}

func (cd *clusterDecoder) add(d Diagnostic) { cd.diags = append(cd.diags, d) }

func (cd *clusterDecoder) file(body *hclsyntax.Body) *Cluster {
	c := &Cluster{}
	for _, a := range sortedAttrs(body) {
		cd.add(at(a.NameRange, "attribute %q is not valid at the top level of a cluster file; "+
			"a cluster file holds only pool blocks, e.g. %s", a.Name, poolExample))
	}
	for _, b := range body.Blocks {
		if b.Type != blockPool {
			cd.add(at(b.TypeRange, "block %q is not valid at the top level of a cluster file%s; "+
				"a cluster file holds only pool blocks, e.g. %s", b.Type, suggest(b.Type, []string{blockPool}), poolExample))
			continue
		}
		if p, ok := cd.pool(b); ok {
			c.Pools = append(c.Pools, p)
		}
	}
	if len(body.Blocks) == 0 {
		// A file whose blocks are all misnamed already has an error for each.
		cd.add(at(body.SrcRange, "no pool blocks: a cluster file declares one or more node pools, e.g. %s", poolExample))
	}
	return c
}

// pool decodes one pool block; ok is false when it has a problem.
func (cd *clusterDecoder) pool(b *hclsyntax.Block) (ClusterPool, bool) {
	n := len(cd.diags)
	p := ClusterPool{Model: DefaultModel, Pos: posString(b.TypeRange)}
	if len(b.Labels) != 1 {
		cd.add(at(b.TypeRange, "a pool block takes exactly one label, its name (pool \"default\" { ... }), got %d", len(b.Labels)))
		if len(b.Labels) > 0 {
			p.Name = b.Labels[0]
		}
	} else {
		p.Name = b.Labels[0]
		if !validPoolName(p.Name) {
			cd.add(at(b.LabelRanges[0], "pool name %q is not valid: a name is 1 to %d of a-z, A-Z, 0-9, '_' and '-' "+
				"(Nomad's rule for node pool names; the pool's nodes are named <pool>-0, <pool>-1, ...)", p.Name, maxPoolName))
		} else if first, dup := cd.first[p.Name]; dup {
			cd.add(at(b.LabelRanges[0], "pool %q is declared twice (first at %s); give each pool its own name",
				p.Name, posString(first)))
		} else {
			cd.first[p.Name] = b.TypeRange
		}
	}
	for _, a := range sortedAttrs(b.Body) {
		switch a.Name {
		case attrNodes:
			p.Nodes = cd.count(a, p.Name, MaxPoolNodes, "")
		case attrGPUsPerNode:
			p.GPUsPerNode = cd.count(a, p.Name, MaxGPUsPerNode, " (the simulator keeps a node's GPUs in one 64-bit mask)")
		case attrModel:
			p.Model = cd.model(a, p.Name)
		case attrNodePool:
			p.NodePool = cd.nodePool(a, p.Name)
		default:
			cd.add(at(a.NameRange, "pool %q: unknown attribute %q%s; valid attributes are nodes, gpus_per_node, model and node_pool",
				p.Name, a.Name, suggest(a.Name, poolAttrs)))
		}
	}
	for _, c := range b.Body.Blocks {
		cd.add(at(c.TypeRange, "pool %q: unknown block %q%s; a pool takes no blocks, only the attributes nodes, gpus_per_node, model and node_pool",
			p.Name, c.Type, suggest(c.Type, poolAttrs)))
	}
	if p.Name == "all" && p.NodePool == "" && len(b.LabelRanges) == 1 {
		cd.add(at(b.LabelRanges[0], "pool \"all\" would put its nodes in Nomad's built-in pool of every node, which no node registers in; "+
			"rename the pool or give it a node_pool"))
	}
	if b.Body.Attributes[attrNodes] == nil {
		cd.add(at(b.TypeRange, "pool %q has no nodes; add nodes = N, the number of GPU nodes in the pool (1 to %d)", p.Name, MaxPoolNodes))
	}
	if b.Body.Attributes[attrGPUsPerNode] == nil {
		cd.add(at(b.TypeRange, "pool %q has no gpus_per_node; add gpus_per_node = N, the GPUs of each node (1 to %d)", p.Name, MaxGPUsPerNode))
	}
	return p, len(cd.diags) == n
}

// validPoolName follows Nomad's rule for node pool names.
func validPoolName(s string) bool {
	if s == "" || len(s) > maxPoolName {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// value evaluates an attribute of pool (dataValue); ok is false when it
// failed or is null (the problem is recorded).
func (cd *clusterDecoder) value(a *hclsyntax.Attribute, pool, want string) (cty.Value, bool) {
	v, ds := dataValue(a, fmt.Sprintf("pool %q", pool), want)
	cd.diags = append(cd.diags, ds...)
	return v, len(ds) == 0
}

// count decodes a whole number from 1 to hi; 0 when it is not one.
func (cd *clusterDecoder) count(a *hclsyntax.Attribute, pool string, hi int, why string) int {
	want := fmt.Sprintf("a whole number from 1 to %d%s", hi, why)
	v, ok := cd.value(a, pool, want)
	if !ok {
		return 0
	}
	if !v.Type().Equals(cty.Number) {
		cd.add(at(a.Expr.Range(), "pool %q: %s must be %s, got %s", pool, a.Name, want, v.Type().FriendlyName()))
		return 0
	}
	f := v.AsBigFloat()
	n, acc := f.Int64()
	if acc != big.Exact || n < 1 || n > int64(hi) {
		cd.add(at(a.Expr.Range(), "pool %q: %s = %s: want %s", pool, a.Name, f.Text('g', 10), want))
		return 0
	}
	return int(n)
}

func (cd *clusterDecoder) model(a *hclsyntax.Attribute, pool string) string {
	const want = `a non-empty string naming the GPU model, e.g. "h100"`
	v, ok := cd.value(a, pool, want)
	if !ok {
		return ""
	}
	if !v.Type().Equals(cty.String) {
		cd.add(at(a.Expr.Range(), "pool %q: model must be %s, got %s", pool, want, v.Type().FriendlyName()))
		return ""
	}
	if v.AsString() == "" {
		cd.add(at(a.Expr.Range(), "pool %q: model must be %s, got an empty string", pool, want))
		return ""
	}
	return v.AsString()
}

// nodePool decodes a pool's node_pool: the Nomad node pool its nodes
// register in, a valid pool name other than Nomad's built-in "all".
func (cd *clusterDecoder) nodePool(a *hclsyntax.Attribute, pool string) string {
	const want = `a Nomad node pool name (1 to 128 of a-z, A-Z, 0-9, '_' and '-'), e.g. "gpu"`
	v, ok := cd.value(a, pool, want)
	if !ok {
		return ""
	}
	if !v.Type().Equals(cty.String) {
		cd.add(at(a.Expr.Range(), "pool %q: node_pool must be %s, got %s", pool, want, v.Type().FriendlyName()))
		return ""
	}
	switch s := v.AsString(); {
	case !validPoolName(s):
		cd.add(at(a.Expr.Range(), "pool %q: node_pool %q is not valid: want %s", pool, s, want))
	case s == "all":
		cd.add(at(a.Expr.Range(), "pool %q: node_pool \"all\" is Nomad's built-in pool of every node, which no node registers in; name another", pool))
	default:
		return s
	}
	return ""
}
