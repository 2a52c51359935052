package hcl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParseServerConfig decodes an arbitrary server configuration. It must
// never panic; it returns either a config whose set values are all in their
// documented ranges, or positioned one-line diagnostics naming the file, the
// same each time. Seeds live in testdata/fuzz/FuzzParseServerConfig.
func FuzzParseServerConfig(f *testing.F) {
	f.Add([]byte(fullConfig))
	f.Add([]byte("policy {\n  drain {\n    return = \"manual\"\n  }\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		const name = "allot.hcl"
		cfg, err := ParseServerConfig(name, src)
		if err != nil {
			var ds Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error is not Diagnostics: %T %v", err, err)
			}
			for i, d := range ds {
				if d.File != name {
					t.Errorf("diagnostic names file %q, want %q: %q", d.File, name, d.String())
				}
				if d.Line < 1 {
					t.Errorf("diagnostic without a position: %q", d.String())
				}
				if d.Message == "" || strings.Contains(d.Message, "\n") {
					t.Errorf("diagnostic message must be one non-empty line: %q", d.Message)
				}
				if i > 0 && ds[i-1].Line > d.Line {
					t.Errorf("diagnostics not sorted: %q before %q", ds[i-1].String(), d.String())
				}
			}
			if _, err2 := ParseServerConfig(name, src); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second parse differs:\n%v\n---\n%v", err, err2)
			}
			return
		}
		checkServerConfig(t, cfg)
		if cfg2, _ := ParseServerConfig(name, src); !reflect.DeepEqual(cfg, cfg2) {
			t.Errorf("second parse differs:\n%+v\n---\n%+v", cfg, cfg2)
		}
	})
}

// checkServerConfig checks the ranges the decoder promises for set values.
func checkServerConfig(t *testing.T, c *ServerConfig) {
	t.Helper()
	port := func(what string, p *int) {
		if p != nil && (*p < 1 || *p > 65535) {
			t.Errorf("%s = %d accepted, outside 1-65535", what, *p)
		}
	}
	port("ports.http", c.Ports.HTTP)
	port("ports.raft", c.Ports.Raft)
	if b := c.BootstrapExpect; b != nil && (*b < 0 || *b > 7) {
		t.Errorf("bootstrap_expect = %d accepted", *b)
	}
	// The policy block is decoded onto the defaults and validated: what
	// comes back is a policy the server would run.
	if err := c.Policy.Validate(); err != nil {
		t.Errorf("policy accepted that its own Validate refuses: %v", err)
	}
}

// Whole days beyond what a time.Duration holds used to wrap around:
// "9999999999d" decoded as a negative lookback, "213504d" as 25 minutes.
func TestParseServerConfigDaysOverflow(t *testing.T) {
	for _, tc := range []struct {
		days    string
		want    time.Duration
		wantErr bool
	}{
		{"7d", 7 * 24 * time.Hour, false},
		{"106751d", 106751 * 24 * time.Hour, false},
		{"106752d", 0, true},
		{"213504d", 0, true},
		{"9999999999d", 0, true},
		{"99999999999999999999d", 0, true},
	} {
		cfg, err := ParseServerConfig("allot.hcl", []byte("policy {\n  lookback = \""+tc.days+"\"\n}\n"))
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "allot.hcl:2:") || !strings.Contains(err.Error(), "at most 106751d")):
			t.Errorf("lookback = %q: %v, want a positioned error naming the limit", tc.days, err)
		case !tc.wantErr && (err != nil || cfg.Policy.Lookback != tc.want):
			t.Errorf("lookback = %q: %v, want %v", tc.days, err, tc.want)
		}
	}
}
