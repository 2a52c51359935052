package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/sim"
)

// scenarioFile is the optional SCENARIO argument of `allot sim`: a JSON
// file naming the budgets, the cluster and the trace (or the generator's
// settings), paths relative to the file. Flags given on the command line win.
// The cluster comes from the first of: Cluster (an HCL file of node pools),
// Pools, and Nodes × GPUsPerNode.
type scenarioFile struct {
	path    string
	Budgets string
	Trace   string
	Cluster string
	// Config is an `allot server` config file whose policy {} block the
	// allot policy runs with (hcl.ServerConfig.Policy).
	Config      string
	Nodes       int // 0: not given
	GPUsPerNode int // 0: not given
	// Generate overrides keys of sim.DefaultGenConfig (snake_case keys,
	// durations as strings: see sim.GenConfig's UnmarshalJSON).
	Generate json.RawMessage
	Pools    []sim.Pool
	// at is where each key's value starts in the file ("nodes",
	// "pools[0].nodes"), for errors found later.
	at   map[string]int
	text []byte
}

// The keys of a scenario and of each of its pools, as the README and the
// cluster file (an HCL pool block's attributes, and its label as "name")
// spell them.
var (
	scenarioKeys = []string{"budgets", "trace", "cluster", "config", "pools", "nodes", "gpus_per_node", "generate"}
	poolKeys     = []string{"name", "nodes", "gpus_per_node", "model", "node_pool"}
)

// scenarioProblems collects what is wrong with a scenario file, each at its
// line and column.
type scenarioProblems struct {
	path string
	text []byte
	list []string
}

func (p *scenarioProblems) add(offset int, format string, args ...any) {
	line, col := lineCol(p.text, offset)
	p.list = append(p.list, fmt.Sprintf("%s:%d:%d: %s", p.path, line, col, fmt.Sprintf(format, args...)))
}

// lineCol is the 1-based line and column (in bytes) of offset in text.
func lineCol(text []byte, offset int) (int, int) {
	offset = min(max(offset, 0), len(text))
	before := text[:offset]
	return 1 + bytes.Count(before, []byte("\n")), offset - bytes.LastIndexByte(before, '\n')
}

// loadScenario reads a scenario file. Its problems (JSON syntax, keys that
// are not the documented ones, values of the wrong type or out of range)
// are printed to stderr one per line, each at file:line:col, and the error
// counts them.
func loadScenario(stderr io.Writer, path string) (*scenarioFile, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, problems := decodeScenario(path, text)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		return nil, fmt.Errorf("%s is not a valid scenario file (%s)", path, plural(len(problems), "problem"))
	}
	return sc, nil
}

// decodeScenario decodes a scenario's text, or lists its problems.
func decodeScenario(path string, text []byte) (*scenarioFile, []string) {
	p := &scenarioProblems{path: path, text: text}
	if len(bytes.TrimSpace(text)) == 0 {
		p.add(0, "the file is empty; a scenario is one JSON object with keys %s", strings.Join(scenarioKeys, ", "))
		return nil, p.list
	}
	keys, err := walkJSON(text)
	if err != nil {
		var je *jsonError
		errors.As(err, &je)
		p.add(je.offset, "%s", je.msg)
		return nil, p.list
	}
	sc := &scenarioFile{path: path, at: map[string]int{}, text: text}
	for _, k := range keys {
		sc.at[k.path] = k.valueAt
		if k.key == "" {
			continue // an array's element
		}
		var valid []string
		where := ""
		switch {
		case k.parent == "":
			valid = scenarioKeys
		case k.parent == "generate":
			valid, where = sim.GenConfigKeys(), " in generate"
		case strings.HasPrefix(k.parent, "pools[") && !strings.Contains(k.parent, "]."):
			valid, where = poolKeys, " in "+k.parent
		default:
			continue
		}
		if k.path == "generate.gpus" || k.path == "generate.nodes" {
			p.add(k.keyAt, "generate.%s: the generator takes the cluster's %s from the scenario's cluster, pools or nodes and gpus_per_node (or the flags); leave it out",
				k.key, map[string]string{"gpus": "GPUs", "nodes": "nodes"}[k.key])
			continue
		}
		if !slices.Contains(valid, k.key) {
			p.add(k.keyAt, "unknown key %s%s%s; valid keys: %s", strconv.Quote(k.key), where, suggestKey(k.key, valid), strings.Join(valid, ", "))
		}
	}
	if len(p.list) > 0 {
		return nil, p.list
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(text, &top); err != nil {
		p.add(0, "the scenario is not a JSON object with keys %s", strings.Join(scenarioKeys, ", "))
		return nil, p.list
	}
	str := func(key string, dst *string) {
		if raw, ok := top[key]; ok {
			decodeValue(p, sc.at[key], key, raw, dst, "a string (a path relative to the scenario file)")
		}
	}
	str("budgets", &sc.Budgets)
	str("trace", &sc.Trace)
	str("cluster", &sc.Cluster)
	str("config", &sc.Config)
	count := func(key string, raw json.RawMessage, at, lo, hi int, dst *int, what string) {
		var n int
		if !decodeValue(p, at, key, raw, &n, fmt.Sprintf("a whole number from %d to %d", lo, hi)) {
			return
		}
		if n < lo || n > hi {
			p.add(at, "%s %d: want %s from %d to %d", key, n, what, lo, hi)
			return
		}
		*dst = n
	}
	if raw, ok := top["nodes"]; ok {
		count("nodes", raw, sc.at["nodes"], 1, 100000, &sc.Nodes, "the number of GPU nodes")
	}
	if raw, ok := top["gpus_per_node"]; ok {
		count("gpus_per_node", raw, sc.at["gpus_per_node"], 1, 64, &sc.GPUsPerNode, "the GPUs of each node")
	}
	if raw, ok := top["generate"]; ok {
		var obj map[string]json.RawMessage
		if decodeValue(p, sc.at["generate"], "generate", raw, &obj, "an object of generator settings") {
			sc.Generate = raw
		}
	}
	if raw, ok := top["pools"]; ok {
		decodePools(p, sc, raw, count)
	}
	if _, ok := top["trace"]; ok && sc.Generate != nil {
		p.add(sc.at["generate"], "generate: the scenario also names a trace, which it would replay instead; keep one of trace and generate")
	}
	return sc, p.list
}

// decodePools reads the scenario's pools, each an object of poolKeys.
func decodePools(p *scenarioProblems, sc *scenarioFile, raw json.RawMessage,
	count func(string, json.RawMessage, int, int, int, *int, string)) {
	var pools []map[string]json.RawMessage
	if !decodeValue(p, sc.at["pools"], "pools", raw, &pools, `an array of pools such as {"name": "h100", "nodes": 16, "gpus_per_node": 8}`) {
		return
	}
	if len(pools) == 0 {
		p.add(sc.at["pools"], "pools is empty; give at least one pool, or leave the key out")
		return
	}
	for i, obj := range pools {
		name := fmt.Sprintf("pools[%d]", i)
		pool := sim.Pool{Model: "h100"}
		for _, req := range []string{"name", "nodes", "gpus_per_node"} {
			if _, ok := obj[req]; !ok {
				p.add(sc.at[name], "%s has no %s; a pool needs name, nodes and gpus_per_node (model defaults to \"h100\")", name, req)
			}
		}
		if raw, ok := obj["name"]; ok {
			decodeValue(p, sc.at[name+".name"], name+".name", raw, &pool.Name, "a string")
		}
		if raw, ok := obj["model"]; ok {
			decodeValue(p, sc.at[name+".model"], name+".model", raw, &pool.Model, "a string")
		}
		if raw, ok := obj["node_pool"]; ok {
			decodeValue(p, sc.at[name+".node_pool"], name+".node_pool", raw, &pool.NodePool, "a string")
		}
		if raw, ok := obj["nodes"]; ok {
			count(name+".nodes", raw, sc.at[name+".nodes"], 1, 100000, &pool.Nodes, "the number of nodes")
		}
		if raw, ok := obj["gpus_per_node"]; ok {
			count(name+".gpus_per_node", raw, sc.at[name+".gpus_per_node"], 1, 64, &pool.GPUsPerNode, "the GPUs of each node")
		}
		sc.Pools = append(sc.Pools, pool)
	}
	if len(p.list) == 0 {
		if err := (sim.ClusterSpec{Pools: sc.Pools}).Validate(); err != nil {
			p.add(sc.at["pools"], "pools: %v", err)
		}
	}
}

// decodeValue decodes one value into dst, or adds a problem saying what the
// key wants.
func decodeValue(p *scenarioProblems, at int, key string, raw json.RawMessage, dst any, want string) bool {
	err := json.Unmarshal(raw, dst)
	if err == nil {
		return true
	}
	got := "that"
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		got = te.Value
	}
	p.add(at, "%s: want %s, not %s %s", key, want, articleFor(got), got)
	return false
}

func articleFor(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an"
	}
	return "a"
}

// suggestKey is ` (did you mean "x"?)` for the valid key that differs from
// got only in case, dashes for underscores, or Go's field spelling
// (GPUsPerNode for gpus_per_node), else the one budgets.Nearest finds; ""
// when none is close.
func suggestKey(got string, valid []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	for _, v := range valid {
		if norm(v) == norm(got) {
			return fmt.Sprintf(" (did you mean %q?)", v)
		}
	}
	if near := budgets.Nearest(got, valid); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// scenarioAt names where the scenario's key starts, for errors found after
// decoding (the generator's settings): "scenario.json:4:15".
func (sc *scenarioFile) scenarioAt(key string) string {
	line, col := lineCol(sc.text, sc.at[key])
	return fmt.Sprintf("%s:%d:%d", sc.path, line, col)
}

// missing names the scenario's key (and that its path is relative to the
// scenario file) in err when err is a file that cannot be opened, the path
// having come from key; other errors are left as they are.
func (sc *scenarioFile) missing(key string, err error) error {
	e, _ := sc.missingAt(key, err)
	return e
}

// missingAt is missing, and whether err was a path of the scenario's key
// that is not there (errors such as hcl.Diagnostics cannot be compared).
func (sc *scenarioFile) missingAt(key string, err error) (error, bool) {
	var pe *fs.PathError
	if _, ok := sc.at[key]; !ok || !errors.As(err, &pe) {
		return err, false
	}
	return fmt.Errorf("%s: %s (relative to the scenario file): %w", sc.scenarioAt(key), key, err), true
}

// jsonKey is one key of a JSON document, or an element of an array (key
// ""): the path of the object or array holding it ("" for the top,
// "pools[0]"), the key, its path ("pools[0].nodes", "pools[0]"), and where
// the key and its value start.
type jsonKey struct {
	parent, key, path string
	keyAt, valueAt    int
}

// jsonError is a JSON syntax problem at a byte offset.
type jsonError struct {
	offset int
	msg    string
}

func (e *jsonError) Error() string { return e.msg }

// walkJSON lists every object key of text, which must hold exactly one JSON
// object: a syntax error, a key given twice, or a second value after the
// object is a *jsonError at its offset.
func walkJSON(text []byte) ([]jsonKey, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	// next is the offset where the next token starts.
	next := func() int {
		i := int(dec.InputOffset())
		for i < len(text) && strings.IndexByte(" \t\r\n,:", text[i]) >= 0 {
			i++
		}
		return i
	}
	fail := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &jsonError{int(se.Offset), se.Error()}
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return &jsonError{len(text), "the JSON ends before the object is closed"}
		}
		return &jsonError{next(), err.Error()}
	}
	var keys []jsonKey
	var value func(path string) error
	value = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		seen := map[string]bool{}
		for i := 0; dec.More(); i++ {
			if d == '[' {
				elem := path + "[" + strconv.Itoa(i) + "]"
				keys = append(keys, jsonKey{parent: path, path: elem, keyAt: next(), valueAt: next()})
				if err := value(elem); err != nil {
					return err
				}
				continue
			}
			keyAt := next()
			tok, err := dec.Token()
			if err != nil {
				return fail(err)
			}
			key := tok.(string)
			if seen[key] {
				return &jsonError{keyAt, fmt.Sprintf("key %q is given twice; give it once", key)}
			}
			seen[key] = true
			child := key
			if path != "" {
				child = path + "." + key
			}
			keys = append(keys, jsonKey{parent: path, key: key, path: child, keyAt: keyAt, valueAt: next()})
			if err := value(child); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return fail(err)
		}
		return nil
	}
	start := next()
	if start < len(text) && text[start] != '{' {
		return nil, &jsonError{start, "a scenario is a JSON object ({...}) with keys " + strings.Join(scenarioKeys, ", ")}
	}
	if err := value(""); err != nil {
		return nil, err
	}
	rest := bytes.TrimLeft(text[dec.InputOffset():], " \t\r\n")
	if after := len(text) - len(rest); after < len(text) {
		return nil, &jsonError{after, "a second JSON value after the scenario's object; a scenario file holds one object"}
	}
	return keys, nil
}
