package hcl

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const twoPools = `# two pools
pool "default" {
  nodes         = 120
  gpus_per_node = 8
}

pool "a100" {
  nodes         = 8
  gpus_per_node = 4
  model         = "a100"
}
`

func TestParseClusterPools(t *testing.T) {
	c, err := ParseCluster("cluster.hcl", []byte(twoPools))
	if err != nil {
		t.Fatal(err)
	}
	want := &Cluster{Pools: []ClusterPool{
		{Name: "default", Nodes: 120, GPUsPerNode: 8, Model: "h100", Pos: "cluster.hcl:2:1"},
		{Name: "a100", Nodes: 8, GPUsPerNode: 4, Model: "a100", Pos: "cluster.hcl:7:1"},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	if c.GPUs() != 120*8+8*4 {
		t.Errorf("GPUs() = %d, want %d", c.GPUs(), 120*8+8*4)
	}
}

// The limits are inclusive: 1 and the maximum of each count are accepted.
func TestParseClusterLimits(t *testing.T) {
	src := "pool \"big\" {\n  nodes = 100000\n  gpus_per_node = 64\n}\npool \"small\" {\n  nodes = 1\n  gpus_per_node = 1\n  model = \"b200\"\n}\n"
	c, err := ParseCluster("c.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pools[0]; p.Nodes != MaxPoolNodes || p.GPUsPerNode != MaxGPUsPerNode {
		t.Errorf("big pool = %+v", p)
	}
	if p := c.Pools[1]; p.Nodes != 1 || p.GPUsPerNode != 1 || p.Model != "b200" {
		t.Errorf("small pool = %+v", p)
	}
}

func TestLoadCluster(t *testing.T) {
	c, err := LoadCluster("../examples/sim/cluster.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := []ClusterPool{{Name: "default", Nodes: 128, GPUsPerNode: 8, Model: "h100", Pos: "../examples/sim/cluster.hcl:6:1"}}
	if !reflect.DeepEqual(c.Pools, want) {
		t.Fatalf("examples/sim/cluster.hcl: got %+v, want %+v", c.Pools, want)
	}
	_, err = LoadCluster(filepath.Join(t.TempDir(), "missing.hcl"))
	var ds Diagnostics
	if err == nil || errors.As(err, &ds) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want a plain not-exist error", err)
	}
}

// Each problem is reported with its file:line:col and what would be valid;
// all of a file's problems come back at once, sorted by position.
func TestParseClusterErrors(t *testing.T) {
	const (
		ok      = "  nodes = 1\n  gpus_per_node = 8\n"
		example = `e.g. pool "default" { ... } setting nodes = 128 and gpus_per_node = 8`
		attrs   = "valid attributes are nodes, gpus_per_node, model and node_pool"
		nodesW  = "want a whole number from 1 to 100000"
		gpusW   = "want a whole number from 1 to 64 (the simulator keeps a node's GPUs in one 64-bit mask)"
	)
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"empty file", "", []string{
			"c.hcl:1:1: no pool blocks: a cluster file declares one or more node pools, " + example}},
		{"only comments", "# nothing\n\n", []string{
			"c.hcl:1:1: no pool blocks: a cluster file declares one or more node pools, " + example}},
		{"syntax error", "pool \"a\" {\n  nodes = \n}\n", []string{
			"c.hcl:2:11: Invalid expression: Expected the start of an expression, but found an invalid expression token."}},
		{"unclosed block", "pool \"a\" {\n  nodes = 1\n", []string{
			"c.hcl:1:10: Unclosed configuration block: There is no closing brace for this block before the end of the file. " +
				"This may be caused by incorrect brace nesting elsewhere in this file."}},
		{"duplicate pool names the first", "pool \"a\" {\n" + ok + "}\npool \"b\" {\n" + ok + "}\npool \"a\" {\n" + ok + "}\n", []string{
			`c.hcl:9:6: pool "a" is declared twice (first at c.hcl:1:1); give each pool its own name`}},
		{"missing counts", "pool \"a\" {\n  model = \"h100\"\n}\n", []string{
			`c.hcl:1:1: pool "a" has no nodes; add nodes = N, the number of GPU nodes in the pool (1 to 100000)`,
			`c.hcl:1:1: pool "a" has no gpus_per_node; add gpus_per_node = N, the GPUs of each node (1 to 64)`}},
		{"zero nodes, too many GPUs", "pool \"a\" {\n  nodes = 0\n  gpus_per_node = 65\n}\n", []string{
			`c.hcl:2:11: pool "a": nodes = 0: ` + nodesW,
			`c.hcl:3:19: pool "a": gpus_per_node = 65: ` + gpusW}},
		{"fraction and negative", "pool \"a\" {\n  nodes = 1.5\n  gpus_per_node = -1\n}\n", []string{
			`c.hcl:2:11: pool "a": nodes = 1.5: ` + nodesW,
			`c.hcl:3:19: pool "a": gpus_per_node = -1: ` + gpusW}},
		{"too many nodes", "pool \"a\" {\n  nodes = 100001\n  gpus_per_node = 0\n}\n", []string{
			`c.hcl:2:11: pool "a": nodes = 100001: ` + nodesW,
			`c.hcl:3:19: pool "a": gpus_per_node = 0: ` + gpusW}},
		{"number beyond int64", "pool \"a\" {\n  nodes = 99999999999999999999999\n  gpus_per_node = 8\n}\n", []string{
			`c.hcl:2:11: pool "a": nodes = 1e+23: ` + nodesW}},
		{"wrong types", "pool \"a\" {\n  nodes = \"8\"\n  gpus_per_node = true\n  model = 3\n}\n", []string{
			`c.hcl:2:11: pool "a": nodes must be a whole number from 1 to 100000, got string`,
			`c.hcl:3:19: pool "a": gpus_per_node must be a whole number from 1 to 64 (the simulator keeps a node's GPUs in one 64-bit mask), got bool`,
			`c.hcl:4:11: pool "a": model must be a non-empty string naming the GPU model, e.g. "h100", got number`}},
		{"list for a count", "pool \"a\" {\n  nodes = [8]\n  gpus_per_node = 8\n}\n", []string{
			`c.hcl:2:11: pool "a": nodes must be a whole number from 1 to 100000, got tuple`}},
		{"null and empty model", "pool \"a\" {\n  nodes = null\n  gpus_per_node = 8\n  model = \"\"\n}\n", []string{
			`c.hcl:2:11: pool "a": nodes must be a whole number from 1 to 100000, got null`,
			`c.hcl:4:11: pool "a": model must be a non-empty string naming the GPU model, e.g. "h100", got an empty string`}},
		{"variables are not allowed", "pool \"a\" {\n  nodes = var.n\n  gpus_per_node = 8\n}\n", []string{
			`c.hcl:2:11: Variables not allowed: Variables may not be used here.`}},
		{"unknown attributes and block with did-you-mean", "pool \"a\" {\n  nodes = 1\n  gpus_per_nod = 8\n  modle = \"a\"\n  node {}\n  color = 1\n}\n", []string{
			`c.hcl:1:1: pool "a" has no gpus_per_node; add gpus_per_node = N, the GPUs of each node (1 to 64)`,
			`c.hcl:3:3: pool "a": unknown attribute "gpus_per_nod" (did you mean "gpus_per_node"?); ` + attrs,
			`c.hcl:4:3: pool "a": unknown attribute "modle" (did you mean "model"?); ` + attrs,
			`c.hcl:5:3: pool "a": unknown block "node" (did you mean "nodes"?); a pool takes no blocks, only the attributes nodes, gpus_per_node, model and node_pool`,
			`c.hcl:6:3: pool "a": unknown attribute "color"; ` + attrs}},
		{"top-level block and attribute", "pools \"a\" {\n" + ok + "}\nnodes = 3\n", []string{
			`c.hcl:1:1: block "pools" is not valid at the top level of a cluster file (did you mean "pool"?); a cluster file holds only pool blocks, ` + example,
			`c.hcl:5:1: attribute "nodes" is not valid at the top level of a cluster file; a cluster file holds only pool blocks, ` + example}},
		{"labels", "pool {\n" + ok + "}\npool \"a\" \"b\" {\n" + ok + "}\n", []string{
			`c.hcl:1:1: a pool block takes exactly one label, its name (pool "default" { ... }), got 0`,
			`c.hcl:5:1: a pool block takes exactly one label, its name (pool "default" { ... }), got 2`}},
		{"pool name", "pool \"GPU pool\" {\n" + ok + "}\npool \"\" {\n" + ok + "}\n", []string{
			`c.hcl:1:6: pool name "GPU pool" is not valid: a name is 1 to 128 of a-z, A-Z, 0-9, '_' and '-' (Nomad's rule for node pool names; the pool's nodes are named <pool>-0, <pool>-1, ...)`,
			`c.hcl:5:6: pool name "" is not valid: a name is 1 to 128 of a-z, A-Z, 0-9, '_' and '-' (Nomad's rule for node pool names; the pool's nodes are named <pool>-0, <pool>-1, ...)`}},
		{"errors of several pools, sorted", "pool \"b\" {\n  nodes = 0\n  gpus_per_node = 8\n}\npool \"a\" {\n  nodes = 2\n  gpus_per_node = 99\n}\n", []string{
			`c.hcl:2:11: pool "b": nodes = 0: ` + nodesW,
			`c.hcl:7:19: pool "a": gpus_per_node = 99: ` + gpusW}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCluster("c.hcl", []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("error is %T, want Diagnostics: %v", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// FuzzLoadCluster decodes an arbitrary cluster file. It must never panic;
// it returns either pools that are all within the simulator's limits, with
// unique valid names, or positioned one-line diagnostics naming the file,
// sorted and the same each time. Seeds live in testdata/fuzz/FuzzLoadCluster.
func FuzzLoadCluster(f *testing.F) {
	f.Add([]byte(twoPools))
	f.Fuzz(func(t *testing.T, src []byte) {
		const name = "cluster.hcl"
		c, err := ParseCluster(name, src)
		if err != nil {
			var ds Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error is not Diagnostics: %T %v", err, err)
			}
			for i, d := range ds {
				if d.File != name {
					t.Errorf("diagnostic names file %q, want %q: %q", d.File, name, d.String())
				}
				if d.Line < 1 || d.Column < 1 {
					t.Errorf("diagnostic without a position: %q", d.String())
				}
				if d.Message == "" || strings.Contains(d.Message, "\n") {
					t.Errorf("diagnostic message must be one non-empty line: %q", d.Message)
				}
				if i > 0 && (ds[i-1].Line > d.Line || ds[i-1].Line == d.Line && ds[i-1].Column > d.Column) {
					t.Errorf("diagnostics not sorted: %q before %q", ds[i-1].String(), d.String())
				}
			}
			if _, err2 := ParseCluster(name, src); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second parse differs:\n%v\n---\n%v", err, err2)
			}
			return
		}
		if len(c.Pools) == 0 {
			t.Fatal("accepted a cluster without pools")
		}
		seen := map[string]bool{}
		for _, p := range c.Pools {
			switch {
			case !validPoolName(p.Name) || seen[p.Name]:
				t.Errorf("accepted pool name %q (invalid or repeated)", p.Name)
			case p.Nodes < 1 || p.Nodes > MaxPoolNodes:
				t.Errorf("pool %q: accepted nodes = %d", p.Name, p.Nodes)
			case p.GPUsPerNode < 1 || p.GPUsPerNode > MaxGPUsPerNode:
				t.Errorf("pool %q: accepted gpus_per_node = %d", p.Name, p.GPUsPerNode)
			case p.Model == "":
				t.Errorf("pool %q: accepted an empty model", p.Name)
			case !strings.HasPrefix(p.Pos, name+":"):
				t.Errorf("pool %q: pos %q", p.Name, p.Pos)
			}
			seen[p.Name] = true
		}
		if c2, _ := ParseCluster(name, src); !reflect.DeepEqual(c, c2) {
			t.Errorf("second parse differs:\n%+v\n---\n%+v", c, c2)
		}
	})
}

// node_pool puts a pool's nodes in a Nomad node pool other than its name;
// a bad name, and Nomad's built-in "all", are refused at the value.
func TestParseClusterNodePool(t *testing.T) {
	src := "pool \"h\" {\n  nodes = 2\n  gpus_per_node = 8\n  node_pool = \"gpu\"\n}\npool \"b\" {\n  nodes = 1\n  gpus_per_node = 8\n  model = \"b200\"\n  node_pool = \"gpu\"\n}\n"
	c, err := ParseCluster("c.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.Pools[0].NodePool != "gpu" || c.Pools[1].NodePool != "gpu" || c.Pools[1].Model != "b200" {
		t.Errorf("pools = %+v", c.Pools)
	}
	for _, tc := range []struct{ value, want string }{
		{`"gpu pool"`, `c.hcl:4:15: pool "h": node_pool "gpu pool" is not valid: want a Nomad node pool name (1 to 128 of a-z, A-Z, 0-9, '_' and '-'), e.g. "gpu"`},
		{`"all"`, `c.hcl:4:15: pool "h": node_pool "all" is Nomad's built-in pool of every node, which no node registers in; name another`},
		{`3`, `c.hcl:4:15: pool "h": node_pool must be a Nomad node pool name`},
	} {
		_, err := ParseCluster("c.hcl", []byte("pool \"h\" {\n  nodes = 2\n  gpus_per_node = 8\n  node_pool = "+tc.value+"\n}\n"))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("node_pool = %s: error %v, want it to start with %s", tc.value, err, tc.want)
		}
	}
	_, err = ParseCluster("c.hcl", []byte("pool \"all\" {\n  nodes = 2\n  gpus_per_node = 8\n}\n"))
	if want := `c.hcl:1:6: pool "all" would put its nodes in Nomad's built-in pool`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("pool \"all\": error %v, want it to start with %s", err, want)
	}
}
