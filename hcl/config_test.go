package hcl

import (
	"errors"
	"strings"
	"testing"
	"time"
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

policy {
  lookback    = "7d"
  runtime_cap = "8h"
  bands {
    protected      = 100
    running        = 90
    pending        = [40, 89]
    unallocated    = [10, 29]
    preemption_gap = 10
  }
  margins {
    fairness       = 0.05
    hysteresis     = 3
    max_slice_loss = 2
  }
  reservation {
    max     = 2
    nodes   = 4
    max_age = "2h"
  }
  bounds {
    max_evaluations = 200
  }
  drain {
    lead   = "15m"
    return = "manual"
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
	p := cfg.Policy
	switch {
	case *p.Lookback != 7*24*time.Hour, *p.RuntimeCap != 8*time.Hour, *p.Protected != 100, *p.Pending != [2]int{40, 89},
		*p.Unallocated != [2]int{10, 29}, *p.FairnessMargin != 0.05, *p.MaxSliceLoss != 2, *p.ReservationMaxAge != 2*time.Hour,
		*p.MaxEvaluations != 200, *p.DrainLead != 15*time.Minute, *p.DrainReturnAfter != 0:
		t.Fatalf("policy %+v", p)
	}
}

func TestParseServerConfigEmptyKeepsDefaults(t *testing.T) {
	cfg, err := ParseServerConfig("empty.hcl", nil)
	if err != nil || cfg.DataDir != nil || cfg.Policy.Lookback != nil {
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
		{"port range", "ports {\n  http = 70000\n}\n", []string{"2:10:", "from 1 to 65535"}},
		{"overlapping bands", "policy {\n  bands {\n    pending = [20, 89]\n    unallocated = [10, 29]\n  }\n}\n", []string{"3:15:", "overlaps unallocated"}},
		{"bad range", "policy {\n  bands {\n    pending = [89, 40]\n  }\n}\n", []string{"3:15:", "[low, high]"}},
		{"duplicate block", "ports {\n}\nports {\n}\n", []string{"3:1:", "given twice"}},
		{"bad log level", "log_level = \"loud\"\n", []string{"1:13:", "want trace, debug"}},
		{"syntax", "data_dir = \n", []string{"cfg.hcl:"}},
		{"token with budgets_token", "server {\n  token = \"a\"\n  budgets_token = \"b\"\n}\n", []string{"2:11:", "either token or budgets_token"}},
		{"empty node_id", "node_id = \"\"\n", []string{"1:11:", "node_id"}},
		{"list of numbers", "retry_join = [1, 2]\n", []string{"1:14:", "list of strings"}},
		{"negative slice loss", "policy {\n  margins {\n    max_slice_loss = -1\n  }\n}\n", []string{"3:22:", "max_slice_loss = -1: want a finite number >= 0"}},
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
