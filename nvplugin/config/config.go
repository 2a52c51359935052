package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/allot-sched/allot/nvplugin/health"
	hclspecpb "github.com/allot-sched/allot/nvplugin/proto/hclspec"
)

// FakeMachines are the go-nvml mock systems `fake` may name.
var FakeMachines = []string{"dgxa100", "dgxh100", "dgxh200", "dgxb200"}

// Config is the decoded `plugin "allot-nvml" { config { ... } }` block.
type Config struct {
	// Enabled false makes the plugin report no GPUs (and touch no NVML).
	Enabled bool `msgpack:"enabled"`
	// IgnoredGPUIDs are GPU UUIDs left out of fingerprints and stats.
	IgnoredGPUIDs []string `msgpack:"ignored_gpu_ids"`
	// FingerprintPeriod is how often GPUs are enumerated and polled, as a Go duration.
	FingerprintPeriod string `msgpack:"fingerprint_period"`
	// XIDIgnore lists the XIDs that never make a GPU unhealthy.
	XIDIgnore []int64 `msgpack:"xid_ignore"`
	// CheckECC and CheckRowRemap turn those health checks on or off.
	CheckECC      bool `msgpack:"check_ecc"`
	CheckRowRemap bool `msgpack:"check_row_remap"`
	// Fake names a go-nvml mock machine to serve instead of real NVML ("" = real).
	Fake string `msgpack:"fake"`
	// FakeSeed makes fake GPU UUIDs unique per simulated host ("" = host name).
	FakeSeed string `msgpack:"fake_seed"`
	// FakeStateDir is the fault-injection directory read in fake mode ("" = none).
	FakeStateDir string `msgpack:"fake_state_dir"`
}

// Default returns the configuration Nomad sends when the block is empty.
func Default() Config {
	ign := make([]int64, len(health.DefaultIgnoredXIDs))
	for i, x := range health.DefaultIgnoredXIDs {
		ign[i] = int64(x)
	}
	return Config{
		Enabled:           true,
		IgnoredGPUIDs:     []string{},
		FingerprintPeriod: "1m",
		XIDIgnore:         ign,
		CheckECC:          true,
		CheckRowRemap:     true,
	}
}

// attr is one schema entry: name, HCL type, and HCL default expression.
type attr struct{ name, typ, def string }

func schemaAttrs() []attr {
	xids := make([]string, len(health.DefaultIgnoredXIDs))
	for i, x := range health.DefaultIgnoredXIDs {
		xids[i] = fmt.Sprint(x)
	}
	return []attr{
		{"enabled", "bool", "true"},
		{"ignored_gpu_ids", "list(string)", "[]"},
		{"fingerprint_period", "string", `"1m"`},
		{"xid_ignore", "list(number)", "[" + strings.Join(xids, ", ") + "]"},
		{"check_ecc", "bool", "true"},
		{"check_row_remap", "bool", "true"},
		{"fake", "string", `""`},
		{"fake_seed", "string", `""`},
		{"fake_state_dir", "string", `""`},
	}
}

// Schema returns the hclspec tree Nomad decodes the config block with: a flat
// object whose every attribute is optional and has a default.
func Schema() *hclspecpb.Spec {
	obj := &hclspecpb.Object{Attributes: map[string]*hclspecpb.Spec{}}
	for _, a := range schemaAttrs() {
		obj.Attributes[a.name] = &hclspecpb.Spec{Block: &hclspecpb.Spec_Default{Default: &hclspecpb.Default{
			Primary: &hclspecpb.Spec{Block: &hclspecpb.Spec_Attr{Attr: &hclspecpb.Attr{Name: a.name, Type: a.typ}}},
			Default: &hclspecpb.Spec{Block: &hclspecpb.Spec_Literal{Literal: &hclspecpb.Literal{Value: a.def}}},
		}}}
	}
	return &hclspecpb.Spec{Block: &hclspecpb.Spec_Object{Object: obj}}
}

// Decode parses the msgpack config of SetConfig over the defaults and validates
// it. Empty input yields Default(). Keys it does not know are ignored.
func Decode(b []byte) (Config, error) {
	c := Default()
	if len(b) > 0 {
		if err := msgpack.Unmarshal(b, &c); err != nil {
			return Config{}, fmt.Errorf("config: not a msgpack map of the schema's attributes: %w", err)
		}
	}
	if c.IgnoredGPUIDs == nil {
		c.IgnoredGPUIDs = []string{}
	}
	return c, c.Validate()
}

// Validate names the first invalid attribute and what would be valid.
func (c Config) Validate() error {
	var errs []error
	if d, err := time.ParseDuration(c.FingerprintPeriod); err != nil || d <= 0 {
		errs = append(errs, fmt.Errorf("fingerprint_period = %q: want a positive Go duration such as \"1m\" or \"10s\"", c.FingerprintPeriod))
	}
	for _, x := range c.XIDIgnore {
		if x < 0 {
			errs = append(errs, fmt.Errorf("xid_ignore: %d is negative; XIDs are non-negative integers", x))
		}
	}
	if c.Fake != "" && !knownMachine(c.Fake) {
		errs = append(errs, fmt.Errorf("fake = %q: want \"\" (real NVML) or one of %s", c.Fake, strings.Join(FakeMachines, ", ")))
	}
	return errors.Join(errs...)
}

func knownMachine(name string) bool {
	for _, m := range FakeMachines {
		if m == name {
			return true
		}
	}
	return false
}

// Period returns the parsed fingerprint period; call it on a validated Config.
func (c Config) Period() time.Duration {
	d, _ := time.ParseDuration(c.FingerprintPeriod)
	return d
}

// Policy returns the health policy the config selects.
func (c Config) Policy() health.Policy {
	ign := make([]uint64, len(c.XIDIgnore))
	for i, x := range c.XIDIgnore {
		ign[i] = uint64(x)
	}
	return health.Policy{IgnoredXIDs: ign, CheckECC: c.CheckECC, CheckRowRemap: c.CheckRowRemap}
}
