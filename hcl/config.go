package hcl

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	hcl2 "github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/allot-sched/allot/overlay/policy"
)

// ServerConfig is an `allot server` configuration file. Pointer fields are
// optional: nil means "not set", and the server's defaults apply. The `hcl`
// tags are the file's keys (decodeTagged); ServerConfig.problems and
// policy.Config.Validate say which values are valid.
type ServerConfig struct {
	// NodeID is the server's raft ID (node_id); unset: kept in data_dir.
	NodeID          *string     `hcl:"node_id,optional"`
	DataDir         *string     `hcl:"data_dir,optional"`
	BindAddr        *string     `hcl:"bind_addr,optional"`
	AdvertiseAddr   *string     `hcl:"advertise_addr,optional"`
	LogLevel        *string     `hcl:"log_level,optional"`
	BootstrapExpect *int        `hcl:"bootstrap_expect,optional"`
	RetryJoin       []string    `hcl:"retry_join,optional"`
	Ports           Ports       `hcl:"ports,block"`
	Tokens          Tokens      `hcl:"server,block"`
	TLS             TLSConfig   `hcl:"tls,block"`
	Nomad           NomadConfig `hcl:"nomad,block"`
	// Policy is the policy {} block decoded onto policy.DefaultConfig (or,
	// when the block sets protected above 100, onto
	// policy.ConfigForMaxPriority(protected+1): the bands move with it) and validated by its
	// Validate: what the server's policy and contracts run with, and what
	// `allot sim -config` replays. Without the block it is the default.
	Policy policy.Config `hcl:"policy,block"`
}

// Ports are the server's listening ports.
type Ports struct {
	HTTP *int `hcl:"http,optional"`
	Raft *int `hcl:"raft,optional"`
}

// Tokens are the server {} block's tokens, one per capability. Token (the
// key `token`) is shorthand for one token holding both budgets and ledger;
// it cannot be given with budgets_token or ledger_token.
type Tokens struct {
	Token    *string `hcl:"token,optional"`
	Read     *string `hcl:"read_token,optional"`
	Budgets  *string `hcl:"budgets_token,optional"`
	Ledger   *string `hcl:"ledger_token,optional"`
	Operator *string `hcl:"operator_token,optional"`
}

// TLSConfig is the tls {} block.
type TLSConfig struct {
	HTTP     *bool   `hcl:"http,optional"`
	RPC      *bool   `hcl:"rpc,optional"`
	CAFile   *string `hcl:"ca_file,optional"`
	CertFile *string `hcl:"cert_file,optional"`
	KeyFile  *string `hcl:"key_file,optional"`
}

// NomadConfig is the nomad {} block: how the adapter reaches Nomad.
type NomadConfig struct {
	// Present is true when the file has a nomad {} block, even an empty one
	// (which drives the Nomad of Nomad's standard environment).
	Present               bool
	Address               *string  `hcl:"address,optional"`
	Token                 *string  `hcl:"token,optional"`
	Namespaces            []string `hcl:"namespaces,optional"`
	NodePools             []string `hcl:"node_pools,optional"`
	ManageSchedulerConfig *bool    `hcl:"manage_scheduler_config,optional"`
}

// problems lists what is wrong with the decoded values, each with the
// fields it concerns (decodeTagged's paths, the one to change first).
func (c *ServerConfig) problems() []fieldProblem {
	var out []fieldProblem
	bad := func(field, format string, args ...any) {
		out = append(out, fieldProblem{fields: []string{field}, message: fmt.Sprintf(format, args...)})
	}
	if id := c.NodeID; id != nil && (*id == "" || strings.TrimSpace(*id) != *id) {
		bad("NodeID", "node_id %q: want a non-empty ID without surrounding spaces (e.g. \"allot-1\")", *id)
	}
	if l := c.LogLevel; l != nil {
		switch strings.ToLower(*l) {
		case "trace", "debug", "info", "warn", "error":
		default:
			bad("LogLevel", "log_level %q: want trace, debug, info, warn or error", *l)
		}
	}
	switch b := c.BootstrapExpect; {
	case b == nil:
	case *b < 0 || *b > 7:
		bad("BootstrapExpect", "bootstrap_expect = %d: want a whole number from 0 to 7", *b)
	case *b%2 == 0 && *b > 0:
		bad("BootstrapExpect", "bootstrap_expect = %d: use an odd number of servers (1, 3 or 5) so that a majority survives a loss", *b)
	}
	for _, p := range []struct {
		field, key string
		port       *int
	}{{"Ports.HTTP", "http", c.Ports.HTTP}, {"Ports.Raft", "raft", c.Ports.Raft}} {
		if p.port != nil && (*p.port < 1 || *p.port > 65535) {
			bad(p.field, "%s = %d: want a whole number from 1 to 65535", p.key, *p.port)
		}
	}
	if t := c.Tokens; t.Token != nil && (t.Budgets != nil || t.Ledger != nil) {
		bad("Tokens.Token", "token is shorthand for budgets_token and ledger_token together: give either token or budgets_token/ledger_token, not both")
	}
	return out
}

// LoadServerConfig reads and decodes a server configuration file.
func LoadServerConfig(path string) (*ServerConfig, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading server config: %w", err)
	}
	return ParseServerConfig(path, src)
}

// ParseServerConfig decodes a server configuration. Unknown keys, repeated
// blocks and bad values are reported as Diagnostics with file:line:col.
func ParseServerConfig(name string, src []byte) (*ServerConfig, error) {
	f, hds := hclsyntax.ParseConfig(src, name, hcl2.InitialPos)
	if hds.HasErrors() {
		ds := fromHCL(name, hds)
		sortDiagnostics(ds)
		return nil, ds
	}
	d := &decoder{file: name}
	cfg := &ServerConfig{Policy: policy.DefaultConfig()}
	set := map[string]hcl2.Range{}
	d.decodeTagged(f.Body, reflect.ValueOf(cfg).Elem(), set, "")
	_, cfg.Nomad.Present = set["Nomad"]
	d.report(cfg.problems(), set, f.Body.(*hclsyntax.Body).SrcRange)
	if len(d.diags) > 0 {
		sortDiagnostics(d.diags)
		return nil, d.diags
	}
	return cfg, nil
}

// decoder collects every problem of one file.
type decoder struct {
	file  string
	diags Diagnostics
	// blockAt is where each block decoded so far starts.
	blockAt map[hcl2.Body]hcl2.Range
}

// content splits body by schema; unknown attributes and blocks, and a block
// given twice, become diagnostics.
func (d *decoder) content(body hcl2.Body, attrs, blocks []string) (map[string]*hcl2.Attribute, map[string]hcl2.Body) {
	schema := &hcl2.BodySchema{}
	for _, a := range attrs {
		schema.Attributes = append(schema.Attributes, hcl2.AttributeSchema{Name: a})
	}
	for _, b := range blocks {
		schema.Blocks = append(schema.Blocks, hcl2.BlockHeaderSchema{Type: b})
	}
	c, hds := body.Content(schema)
	for _, hd := range hds {
		// hcl says a key is not expected, and names a close one when there
		// is one; say which are.
		switch hd.Summary {
		case "Unsupported argument":
			hd.Detail += " " + validHere("keys", attrs)
		case "Unsupported block type":
			hd.Detail += " " + validHere("blocks", blocks)
		}
	}
	d.diags = append(d.diags, fromHCL(d.file, hds)...)
	if d.blockAt == nil {
		d.blockAt = map[hcl2.Body]hcl2.Range{}
	}
	bs := map[string]hcl2.Body{}
	for _, b := range c.Blocks {
		if _, dup := bs[b.Type]; dup {
			d.diags = append(d.diags, at(b.DefRange, "block %q given twice; merge them into one", b.Type))
			continue
		}
		bs[b.Type] = b.Body
		d.blockAt[b.Body] = b.DefRange
	}
	if c.Attributes == nil {
		c.Attributes = map[string]*hcl2.Attribute{}
	}
	return c.Attributes, bs
}

// validHere is the sentence listing the keys or blocks a body takes.
func validHere(what string, names []string) string {
	if len(names) == 0 {
		return "No " + what + " are valid here."
	}
	return "Valid " + what + " here: " + strings.Join(names, ", ") + "."
}

// policy decodes the policy {} block onto the defaults by policy.Config's
// tags, then reports each of Validate's problems at the key that set the
// field it names first (the block's own position when the file set none of
// them: a default that no longer fits the values given). Its paths are
// policy.Config's promoted field names ("Pending"), as Validate names them.
func (d *decoder) policy(body hcl2.Body) policy.Config {
	before := len(d.diags)
	set := map[string]hcl2.Range{}
	c := policy.DefaultConfig()
	d.decodeTagged(body, reflect.ValueOf(&c).Elem(), set, "")
	if _, given := set["Protected"]; given && c.Protected > 100 {
		// A cluster with a larger job_max_priority: the default bands move
		// with protected (running 9 below it: ConfigForMaxPriority puts
		// protected one below the largest priority), and the file's own
		// values go on top of those. protected = 100 moves nothing: with
		// the default running (90) it is refused (a gap above running),
		// where moving the bands would change them silently for a file
		// written for the bands before protected moved to 99.
		d.diags, set = d.diags[:before], map[string]hcl2.Range{}
		c = policy.ConfigForMaxPriority(c.Protected + 1)
		d.decodeTagged(body, reflect.ValueOf(&c).Elem(), set, "")
	}
	var ps []fieldProblem
	for _, p := range c.Problems() {
		ps = append(ps, fieldProblem{fields: p.Fields, message: p.Message})
	}
	d.report(ps, set, d.blockAt[body])
	return c
}

func (d *decoder) bad(attr *hcl2.Attribute, format string, args ...any) {
	r := hcl2.Range{Filename: d.file}
	if attr != nil {
		r = attr.Expr.Range()
	}
	d.diags = append(d.diags, at(r, format, args...))
}

// value evaluates attr (nil when absent or broken).
func (d *decoder) value(attr *hcl2.Attribute) (cty.Value, bool) {
	if attr == nil {
		return cty.NilVal, false
	}
	v, hds := attr.Expr.Value(nil)
	if hds.HasErrors() {
		d.diags = append(d.diags, fromHCL(d.file, hds)...)
		return cty.NilVal, false
	}
	if v.IsNull() || !v.IsKnown() {
		d.bad(attr, "%s: a value is required", attr.Name)
		return cty.NilVal, false
	}
	return v, true
}

func (d *decoder) str(attr *hcl2.Attribute) *string {
	v, ok := d.value(attr)
	if !ok {
		return nil
	}
	if v.Type() != cty.String {
		d.bad(attr, "%s: want a string in quotes, got %s", attr.Name, v.Type().FriendlyName())
		return nil
	}
	s := v.AsString()
	return &s
}

func (d *decoder) bool(attr *hcl2.Attribute) *bool {
	v, ok := d.value(attr)
	if !ok {
		return nil
	}
	if v.Type() != cty.Bool {
		d.bad(attr, "%s: want true or false, got %s", attr.Name, v.Type().FriendlyName())
		return nil
	}
	b := v.True()
	return &b
}

func (d *decoder) number(attr *hcl2.Attribute) (*big.Float, bool) {
	v, ok := d.value(attr)
	if !ok {
		return nil, false
	}
	if v.Type() != cty.Number {
		d.bad(attr, "%s: want a number, got %s", attr.Name, v.Type().FriendlyName())
		return nil, false
	}
	return v.AsBigFloat(), true
}

func (d *decoder) strList(attr *hcl2.Attribute) []string {
	v, ok := d.value(attr)
	if !ok {
		return nil
	}
	if !v.Type().IsTupleType() && !v.Type().IsListType() {
		d.bad(attr, `%s: want a list of strings, e.g. ["a", "b"]`, attr.Name)
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			d.bad(attr, `%s: want a list of strings, e.g. ["a", "b"]`, attr.Name)
			return nil
		}
		out = append(out, e.AsString())
	}
	return out
}

// maxDays is the most whole days a time.Duration holds (about 292 years);
// more would wrap around to a negative or a wrong positive duration.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

// parseDuration accepts Go durations ("90m", "4h") and whole days ("7d").
func (d *decoder) parseDuration(attr *hcl2.Attribute, s, alt string) *time.Duration {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseInt(days, 10, 64); err == nil && n > 0 && n <= maxDays {
			v := time.Duration(n) * 24 * time.Hour
			return &v
		}
	} else if v, err := time.ParseDuration(s); err == nil && v > 0 {
		return &v
	}
	if alt != "" {
		alt = " " + alt
	}
	d.bad(attr, "%s = %q: want a positive duration such as \"90m\", \"8h\" or \"7d\" (at most %dd)%s", attr.Name, s, maxDays, alt)
	return nil
}
