package hcl

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"

	hcl2 "github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// ServerConfig is an `allot server` configuration file. Pointer fields are
// optional: nil means "not set", and the server's defaults apply.
type ServerConfig struct {
	// NodeID is the server's raft ID (node_id); unset: kept in data_dir.
	NodeID          *string
	DataDir         *string
	BindAddr        *string
	AdvertiseAddr   *string
	LogLevel        *string
	BootstrapExpect *int
	RetryJoin       []string
	Ports           Ports
	Tokens          Tokens // server { ... }
	TLS             TLSConfig
	Nomad           NomadConfig
	Policy          PolicyConfig
}

// Ports are the server's listening ports.
type Ports struct {
	HTTP *int
	Raft *int
}

// Tokens are the server {} block's tokens, one per capability. Token (the
// key `token`) is shorthand for one token holding both budgets and ledger;
// it cannot be given with budgets_token or ledger_token.
type Tokens struct {
	Token    *string
	Read     *string
	Budgets  *string
	Ledger   *string
	Operator *string
}

// TLSConfig is the tls {} block.
type TLSConfig struct {
	HTTP     *bool
	RPC      *bool
	CAFile   *string
	CertFile *string
	KeyFile  *string
}

// NomadConfig is the nomad {} block: how the adapter reaches Nomad.
type NomadConfig struct {
	// Present is true when the file has a nomad {} block, even an empty one
	// (which drives the Nomad of Nomad's standard environment).
	Present               bool
	Address               *string
	Token                 *string
	Namespaces            []string
	NodePools             []string
	ManageSchedulerConfig *bool
}

// PolicyConfig is the policy {} block: the knobs of overlay/policy.
type PolicyConfig struct {
	Lookback   *time.Duration
	RuntimeCap *time.Duration
	// MaxCheckpointNotice caps a job's checkpoint_notice.
	MaxCheckpointNotice *time.Duration
	// bands {}
	Protected     *int
	Running       *int
	Pending       *[2]int
	Unallocated   *[2]int
	PreemptionGap *int
	// margins {}
	FairnessMargin *float64
	Hysteresis     *int
	// MaxSliceLoss bounds the work one time-slicing stop may throw away, as
	// a multiple of the beneficiary's protected GPU-time (0: no bound).
	MaxSliceLoss *float64
	// reservation {}
	MaxReservations   *int
	ReservationNodes  *int
	ReservationMaxAge *time.Duration
	// bounds {}
	MaxEvaluations *int
	// drain {}
	DrainLead *time.Duration
	// DrainReturnAfter: return = "manual" sets 0 (only an operator returns a node).
	DrainReturnAfter *time.Duration
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
	cfg := &ServerConfig{}
	d.root(f.Body, cfg)
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
	d.diags = append(d.diags, fromHCL(d.file, hds)...)
	bs := map[string]hcl2.Body{}
	for _, b := range c.Blocks {
		if _, dup := bs[b.Type]; dup {
			d.diags = append(d.diags, at(b.DefRange, "block %q given twice; merge them into one", b.Type))
			continue
		}
		bs[b.Type] = b.Body
	}
	if c.Attributes == nil {
		c.Attributes = map[string]*hcl2.Attribute{}
	}
	return c.Attributes, bs
}

func (d *decoder) root(body hcl2.Body, cfg *ServerConfig) {
	attrs, blocks := d.content(body,
		[]string{"node_id", "data_dir", "bind_addr", "advertise_addr", "log_level", "bootstrap_expect", "retry_join"},
		[]string{"ports", "server", "tls", "nomad", "policy"})
	if cfg.NodeID = d.str(attrs["node_id"]); cfg.NodeID != nil && strings.TrimSpace(*cfg.NodeID) != *cfg.NodeID || cfg.NodeID != nil && *cfg.NodeID == "" {
		d.bad(attrs["node_id"], "node_id %q: want a non-empty ID without surrounding spaces (e.g. \"allot-1\")", *cfg.NodeID)
	}
	cfg.DataDir = d.str(attrs["data_dir"])
	cfg.BindAddr = d.str(attrs["bind_addr"])
	cfg.AdvertiseAddr = d.str(attrs["advertise_addr"])
	if cfg.LogLevel = d.str(attrs["log_level"]); cfg.LogLevel != nil {
		switch strings.ToLower(*cfg.LogLevel) {
		case "trace", "debug", "info", "warn", "error":
		default:
			d.bad(attrs["log_level"], "log_level %q: want trace, debug, info, warn or error", *cfg.LogLevel)
		}
	}
	if cfg.BootstrapExpect = d.int(attrs["bootstrap_expect"], 0, 7); cfg.BootstrapExpect != nil && *cfg.BootstrapExpect%2 == 0 && *cfg.BootstrapExpect > 0 {
		d.bad(attrs["bootstrap_expect"], "bootstrap_expect = %d: use an odd number of servers (1, 3 or 5) so that a majority survives a loss", *cfg.BootstrapExpect)
	}
	cfg.RetryJoin = d.strList(attrs["retry_join"])
	if b, ok := blocks["ports"]; ok {
		a, _ := d.content(b, []string{"http", "raft"}, nil)
		cfg.Ports.HTTP, cfg.Ports.Raft = d.int(a["http"], 1, 65535), d.int(a["raft"], 1, 65535)
	}
	if b, ok := blocks["server"]; ok {
		a, _ := d.content(b, []string{"token", "read_token", "budgets_token", "ledger_token", "operator_token"}, nil)
		cfg.Tokens = Tokens{Token: d.str(a["token"]), Read: d.str(a["read_token"]), Budgets: d.str(a["budgets_token"]),
			Ledger: d.str(a["ledger_token"]), Operator: d.str(a["operator_token"])}
		if cfg.Tokens.Token != nil && (cfg.Tokens.Budgets != nil || cfg.Tokens.Ledger != nil) {
			d.bad(a["token"], "token is shorthand for budgets_token and ledger_token together: give either token or budgets_token/ledger_token, not both")
		}
	}
	if b, ok := blocks["tls"]; ok {
		a, _ := d.content(b, []string{"http", "rpc", "ca_file", "cert_file", "key_file"}, nil)
		cfg.TLS = TLSConfig{HTTP: d.bool(a["http"]), RPC: d.bool(a["rpc"]), CAFile: d.str(a["ca_file"]),
			CertFile: d.str(a["cert_file"]), KeyFile: d.str(a["key_file"])}
	}
	if b, ok := blocks["nomad"]; ok {
		a, _ := d.content(b, []string{"address", "token", "namespaces", "node_pools", "manage_scheduler_config"}, nil)
		cfg.Nomad = NomadConfig{Present: true, Address: d.str(a["address"]), Token: d.str(a["token"]), Namespaces: d.strList(a["namespaces"]),
			NodePools: d.strList(a["node_pools"]), ManageSchedulerConfig: d.bool(a["manage_scheduler_config"])}
	}
	if b, ok := blocks["policy"]; ok {
		d.policy(b, &cfg.Policy)
	}
}

func (d *decoder) policy(body hcl2.Body, p *PolicyConfig) {
	attrs, blocks := d.content(body, []string{"lookback", "runtime_cap", "max_checkpoint_notice"},
		[]string{"bands", "margins", "reservation", "bounds", "drain"})
	p.Lookback, p.RuntimeCap = d.duration(attrs["lookback"]), d.duration(attrs["runtime_cap"])
	p.MaxCheckpointNotice = d.duration(attrs["max_checkpoint_notice"])
	if b, ok := blocks["bands"]; ok {
		a, _ := d.content(b, []string{"protected", "running", "pending", "unallocated", "preemption_gap"}, nil)
		p.Protected, p.Running = d.int(a["protected"], 1, math.MaxInt32), d.int(a["running"], 1, math.MaxInt32)
		p.Pending, p.Unallocated = d.intRange(a["pending"]), d.intRange(a["unallocated"])
		p.PreemptionGap = d.int(a["preemption_gap"], 1, 100)
		d.checkBands(a, p)
	}
	if b, ok := blocks["margins"]; ok {
		a, _ := d.content(b, []string{"fairness", "hysteresis", "max_slice_loss"}, nil)
		p.FairnessMargin, p.Hysteresis = d.float(a["fairness"]), d.int(a["hysteresis"], 0, 100)
		p.MaxSliceLoss = d.float(a["max_slice_loss"])
	}
	if b, ok := blocks["reservation"]; ok {
		a, _ := d.content(b, []string{"max", "nodes", "max_age"}, nil)
		p.MaxReservations, p.ReservationNodes = d.int(a["max"], 0, 1000), d.int(a["nodes"], 1, 10000)
		p.ReservationMaxAge = d.duration(a["max_age"])
	}
	if b, ok := blocks["bounds"]; ok {
		a, _ := d.content(b, []string{"max_evaluations"}, nil)
		p.MaxEvaluations = d.int(a["max_evaluations"], 1, 1_000_000)
	}
	if b, ok := blocks["drain"]; ok {
		a, _ := d.content(b, []string{"lead", "return"}, nil)
		p.DrainLead = d.duration(a["lead"])
		if r := a["return"]; r != nil {
			if s := d.str(r); s != nil && *s == "manual" {
				zero := time.Duration(0)
				p.DrainReturnAfter = &zero
			} else if s != nil {
				p.DrainReturnAfter = d.parseDuration(r, *s, `or "manual"`)
			}
		}
	}
}

// checkBands: the bands must not overlap, from unallocated (lowest) to
// protected (highest), and pending must reach preemption_gap above
// unallocated so that allocated work can evict free work.
func (d *decoder) checkBands(a map[string]*hcl2.Attribute, p *PolicyConfig) {
	if p.Pending != nil && p.Unallocated != nil && p.Pending[0] <= p.Unallocated[1] {
		d.bad(a["pending"], "pending %v overlaps unallocated %v: pending must sit above unallocated", *p.Pending, *p.Unallocated)
	}
	if p.Pending != nil && p.Running != nil && *p.Running <= p.Pending[1] {
		d.bad(a["running"], "running = %d must be above pending's top %d", *p.Running, p.Pending[1])
	}
	if p.Running != nil && p.Protected != nil && *p.Protected <= *p.Running {
		d.bad(a["protected"], "protected = %d must be above running = %d", *p.Protected, *p.Running)
	}
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

func (d *decoder) int(attr *hcl2.Attribute, lo, hi int) *int {
	f, ok := d.number(attr)
	if !ok {
		return nil
	}
	i, acc := f.Int64()
	if acc != big.Exact || i < int64(lo) || i > int64(hi) {
		d.bad(attr, "%s = %s: want a whole number from %d to %d", attr.Name, f.Text('g', 10), lo, hi)
		return nil
	}
	n := int(i)
	return &n
}

func (d *decoder) float(attr *hcl2.Attribute) *float64 {
	f, ok := d.number(attr)
	if !ok {
		return nil
	}
	x, _ := f.Float64()
	if x < 0 || math.IsInf(x, 0) {
		d.bad(attr, "%s = %s: want a finite number >= 0", attr.Name, f.Text('g', 10))
		return nil
	}
	return &x
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

func (d *decoder) intRange(attr *hcl2.Attribute) *[2]int {
	v, ok := d.value(attr)
	if !ok {
		return nil
	}
	want := fmt.Sprintf("%s: want [low, high] with 1 <= low <= high, e.g. [40, 89]", attr.Name)
	if (!v.Type().IsTupleType() && !v.Type().IsListType()) || v.LengthInt() != 2 {
		d.bad(attr, "%s", want)
		return nil
	}
	var r [2]int
	for i, it := 0, v.ElementIterator(); it.Next(); i++ {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.Number {
			d.bad(attr, "%s", want)
			return nil
		}
		n, acc := e.AsBigFloat().Int64()
		if acc != big.Exact || n < 1 || n > math.MaxInt32 {
			d.bad(attr, "%s", want)
			return nil
		}
		r[i] = int(n)
	}
	if r[0] > r[1] {
		d.bad(attr, "%s", want)
		return nil
	}
	return &r
}

func (d *decoder) duration(attr *hcl2.Attribute) *time.Duration {
	s := d.str(attr)
	if s == nil {
		return nil
	}
	return d.parseDuration(attr, *s, "")
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
