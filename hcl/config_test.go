package hcl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/policy"
)

const fullConfig = `
data_dir         = "/var/lib/allot"
bind_addr        = "0.0.0.0"
advertise_addr   = "10.0.0.5"
log_level        = "info"
bootstrap_expect = 3
retry_join       = ["10.0.0.6:4650", "10.0.0.7:4650"]

ports {
  http = 4650
  raft = 4651
}

node_id = "allot-1"

server {
  token          = "abc"
  read_token     = "r"
  operator_token = "op"
}

tls {
  http      = true
  rpc       = true
  ca_file   = "ca.pem"
  cert_file = "server.pem"
  key_file  = "server-key.pem"
}

nomad {
  address                 = "https://nomad.service:4646"
  token                   = "nomad-token"
  namespaces              = ["default", "ml"]
  node_pools              = ["gpu"]
  manage_scheduler_config = true
}

# Every policy key, none at its default; protected above 100 moves the
# default bands (policy.ConfigForMaxPriority), and the file's go on top.
policy {
  lookback    = "3d"
  runtime_cap = "12h"
  max_checkpoint_notice = "3m"
  bands {
    protected      = 169
    running        = 150
    pending        = [50, 140]
    unallocated    = [5, 30]
    preemption_gap = 20
  }
  margins {
    fairness       = 0.5
    hysteresis     = 7
    max_slice_loss = 0
  }
  reservation {
    max     = 0
    nodes   = 9
    max_age = "45m"
  }
  bounds {
    max_evaluations = 64
  }
  drain {
    lead   = "5m"
    return = "1d"
  }
}
`

func TestParseServerConfigFull(t *testing.T) {
	cfg, err := ParseServerConfig("server.hcl", []byte(fullConfig))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case *cfg.DataDir != "/var/lib/allot", *cfg.BootstrapExpect != 3, len(cfg.RetryJoin) != 2,
		*cfg.Ports.HTTP != 4650, *cfg.Ports.Raft != 4651, *cfg.Tokens.Token != "abc", *cfg.Tokens.Read != "r", *cfg.Tokens.Operator != "op", *cfg.NodeID != "allot-1", !*cfg.TLS.RPC,
		*cfg.Nomad.Address != "https://nomad.service:4646", len(cfg.Nomad.Namespaces) != 2, !*cfg.Nomad.ManageSchedulerConfig:
		t.Fatalf("decoded %+v", cfg)
	}
	// Every key lands in the policy.Config field that declares it, the
	// runtime cap in the contract's own.
	want := policy.ConfigForMaxPriority(170)
	want.Config = contract.Config{RuntimeCap: 12 * time.Hour, MaxNotice: 3 * time.Minute}
	want.Lookback = 72 * time.Hour
	want.BandsConfig = policy.BandsConfig{Protected: 169, Running: 150, Pending: policy.Range{Low: 50, High: 140},
		Unallocated: policy.Range{Low: 5, High: 30}, PreemptionGap: 20}
	want.MarginsConfig = policy.MarginsConfig{FairnessMargin: 0.5, Hysteresis: 7}
	want.ReservationConfig = policy.ReservationConfig{ReservationNodes: 9, ReservationMaxAge: 45 * time.Minute}
	want.MaxEvaluations = 64
	want.DrainConfig = policy.DrainConfig{DrainLead: 5 * time.Minute, DrainReturnAfter: 24 * time.Hour}
	if diff := cmp.Diff(want, cfg.Policy); diff != "" {
		t.Fatalf("policy (-want +got):\n%s", diff)
	}
}

// drain { return = "manual" } is DrainReturnAfter 0: only an operator
// returns a node.
func TestParseServerConfigManualReturn(t *testing.T) {
	cfg, err := ParseServerConfig("p.hcl", []byte("policy {\n  drain {\n    return = \"manual\"\n  }\n}\n"))
	if err != nil || cfg.Policy.DrainReturnAfter != 0 || cfg.Policy.DrainLead != policy.DefaultConfig().DrainLead {
		t.Fatalf("%v %+v", err, cfg.Policy.DrainConfig)
	}
}

func TestParseServerConfigEmptyKeepsDefaults(t *testing.T) {
	cfg, err := ParseServerConfig("empty.hcl", nil)
	if err != nil || cfg.DataDir != nil || !cmp.Equal(cfg.Policy, policy.DefaultConfig()) {
		t.Fatalf("%+v %v", cfg, err)
	}
}

func TestParseServerConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // each a "line:col: message fragment"
	}{
		{"unknown key", "data_dirr = \"/x\"\n", []string{"1:1:", "Unsupported argument"}},
		{"unknown block", "polcy {\n}\n", []string{"1:1:", "Unsupported block type"}},
		{"unknown nested key", "policy {\n  bands {\n    protectd = 100\n  }\n}\n", []string{"3:5:", "Unsupported argument"}},
		{"bad duration", "policy {\n  lookback = \"a week\"\n}\n", []string{"2:14:", `want a positive duration`}},
		{"number as string", "bootstrap_expect = \"3\"\n", []string{"1:20:", "want a number"}},
		{"even servers", "bootstrap_expect = 2\n", []string{"1:20:", "odd number"}},
		{"too many servers", "bootstrap_expect = 9\n", []string{"1:20:", "bootstrap_expect = 9: want a whole number from 0 to 7"}},
		{"raft port zero", "ports {\n  raft = 0\n}\n", []string{"2:10:", "raft = 0: want a whole number from 1 to 65535"}},
		{"bool as string", "tls {\n  rpc = \"yes\"\n}\n", []string{"2:9:", "rpc: want true or false"}},
		{"unknown nomad key", "nomad {\n  adress = \"x\"\n}\n", []string{"2:3:", "Unsupported argument", `Did you mean "address"?`}},
		{"port range", "ports {\n  http = 70000\n}\n", []string{"2:10:", "from 1 to 65535"}},
		{"overlapping bands", "policy {\n  bands {\n    pending = [20, 89]\n    unallocated = [10, 29]\n  }\n}\n", []string{"3:15:", "overlaps unallocated"}},
		{"bands too close", "policy {\n  bands {\n    unallocated = [10, 35]\n  }\n}\n", []string{"3:19:", "pending = [40, 89] sits too close to unallocated = [10, 35]", "at least preemption_gap (10) above"}},
		{"bad range", "policy {\n  bands {\n    pending = [89, 40]\n  }\n}\n", []string{"3:15:", "[low, high]"}},
		{"range of three", "policy {\n  bands {\n    pending = [40, 60, 89]\n  }\n}\n", []string{"3:15:", "want [low, high], two whole numbers"}},
		{"protected below default running", "policy {\n  bands {\n    protected = 90\n  }\n}\n", []string{"3:17:", "protected = 90 must be above running = 90"}},
		{"protected 100 alone", "policy {\n  bands {\n    protected = 100\n  }\n}\n", []string{"3:17:", "protected = 100 is preemption_gap (10) or more above running = 90", "want protected from 91 to 99"}},
		{"protected a preemption gap above running", "policy {\n  bands {\n    protected = 100\n    running   = 90\n  }\n}\n", []string{"3:17:", "protected = 100 is preemption_gap (10) or more above running = 90", "would preempt jobs of the running band", "want protected from 91 to 99"}},
		{"running into pending", "policy {\n  bands {\n    running = 80\n  }\n}\n", []string{"3:15:", "running = 80 must be above pending's high 89"}},
		{"gap out of range", "policy {\n  bands {\n    preemption_gap = 0\n  }\n}\n", []string{"3:22:", "preemption_gap = 0: want a whole number from 1 to 100"}},
		{"hysteresis zero", "policy {\n  margins {\n    hysteresis = 0\n  }\n}\n", []string{"3:18:", "hysteresis = 0: want a whole number from 1 to 100"}},
		{"fractional int", "policy {\n  bounds {\n    max_evaluations = 1.5\n  }\n}\n", []string{"3:23:", "max_evaluations = 1.5: want a whole number"}},
		{"unknown policy key", "policy {\n  runtimecap = \"12h\"\n}\n", []string{"2:3:", "Unsupported argument", `Did you mean "runtime_cap"?`, "Valid keys here: runtime_cap, max_checkpoint_notice, lookback."}},
		{"unknown bands key", "policy {\n  bands {\n    gap = 10\n  }\n}\n", []string{"3:5:", "Unsupported argument", "Valid keys here: protected, running, pending, unallocated, preemption_gap."}},
		{"block where none go", "ports {\n  extra {\n  }\n}\n", []string{"2:3:", "Unsupported block type", "No blocks are valid here."}},
		{"unknown policy block", "policy {\n  band {\n  }\n}\n", []string{"2:3:", "Unsupported block type", `Did you mean "bands"?`, "Valid blocks here: bands, margins, reservation, bounds, drain."}},
		{"duration as number", "policy {\n  runtime_cap = 12\n}\n", []string{"2:17:", "runtime_cap: want a string in quotes"}},
		{"zero runtime cap", "policy {\n  runtime_cap = \"0h\"\n}\n", []string{"2:17:", `runtime_cap = "0h": want a positive duration`}},
		{"bad drain return", "policy {\n  drain {\n    return = \"never\"\n  }\n}\n", []string{"3:14:", `return = "never": want a positive duration`, `or "manual"`}},
		{"duplicate policy block", "policy {\n}\npolicy {\n}\n", []string{"3:1:", `block "policy" given twice`}},
		{"protected above nomad", "policy {\n  bands {\n    protected = 40000\n  }\n}\n", []string{"3:17:", "at most 32766"}},
		{"duplicate block", "ports {\n}\nports {\n}\n", []string{"3:1:", "given twice"}},
		{"bad log level", "log_level = \"loud\"\n", []string{"1:13:", "want trace, debug"}},
		{"syntax", "data_dir = \n", []string{"cfg.hcl:"}},
		{"token with budgets_token", "server {\n  token = \"a\"\n  budgets_token = \"b\"\n}\n", []string{"2:11:", "either token or budgets_token"}},
		{"empty node_id", "node_id = \"\"\n", []string{"1:11:", "node_id"}},
		{"list of numbers", "retry_join = [1, 2]\n", []string{"1:14:", "list of strings"}},
		{"negative slice loss", "policy {\n  margins {\n    max_slice_loss = -1\n  }\n}\n", []string{"3:22:", "max_slice_loss = -1: want a finite number >= 0"}},
		{"huge fairness", "policy {\n  margins {\n    fairness = 1e400\n  }\n}\n", []string{"3:16:", "want a finite number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseServerConfig("cfg.hcl", []byte(tc.src))
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("got %v, want Diagnostics", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseServerConfigReportsEveryProblem(t *testing.T) {
	_, err := ParseServerConfig("cfg.hcl", []byte("bootstrap_expect = 2\nlog_level = \"loud\"\nnope = 1\n"))
	var ds Diagnostics
	if !errors.As(err, &ds) || len(ds) != 3 {
		t.Fatalf("got %v", err)
	}
}

func TestParseServerConfigNomadBlockPresent(t *testing.T) {
	for src, want := range map[string]bool{"": false, "nomad {}\n": true, fullConfig: true, "data_dir = \"/x\"\n": false} {
		cfg, err := ParseServerConfig("server.hcl", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Nomad.Present != want {
			t.Errorf("%q: nomad block present = %t, want %t", src, cfg.Nomad.Present, want)
		}
	}
}
