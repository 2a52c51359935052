package config

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"
)

// golden decodes a vector of shared/nomad-device-plugin.md §4.2 (spaces only
// separate tokens there).
func golden(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The spec's golden vectors, produced by hcl/v2 + go-cty the way Nomad encodes.
const (
	goldenDefaults = "84 a7656e61626c6564 c3 b266696e6765727072696e745f706572696f64 a2316d af69676e6f7265645f6770755f696473 90 aa7869645f69676e6f7265 92 0d 1f"
	goldenSet      = "84 a7656e61626c6564 c2 b266696e6765727072696e745f706572696f64 a23573 af69676e6f7265645f6770755f696473 92 a54750552d61 a54750552d62 aa7869645f69676e6f7265 91 2b"
)

func TestDecodeGoldenVectors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want func(*Config)
	}{
		{"empty input is all defaults", nil, func(*Config) {}},
		{"the spec's defaults vector", golden(t, goldenDefaults), func(c *Config) { c.XIDIgnore = []int64{13, 31} }},
		{"the spec's vector with every value set", golden(t, goldenSet), func(c *Config) {
			c.Enabled = false
			c.IgnoredGPUIDs = []string{"GPU-a", "GPU-b"}
			c.FingerprintPeriod = "5s"
			c.XIDIgnore = []int64{43}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			tc.want(&want)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Decode (-want +got):\n%s", d)
			}
		})
	}
}

func TestDecodeIsIdempotent(t *testing.T) {
	a, err1 := Decode(golden(t, goldenSet))
	b, err2 := Decode(golden(t, goldenSet))
	if err1 != nil || err2 != nil || !cmp.Equal(a, b) {
		t.Fatalf("two decodes differ: %v %v %s", err1, err2, cmp.Diff(a, b))
	}
}

func TestDecodeRejectsBadConfig(t *testing.T) {
	enc := func(m map[string]any) []byte {
		b, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		in      []byte
		wantErr string
	}{
		{"unparseable period", enc(map[string]any{"fingerprint_period": "soon"}), `fingerprint_period = "soon": want a positive Go duration`},
		{"zero period", enc(map[string]any{"fingerprint_period": "0s"}), "fingerprint_period"},
		{"unknown fake machine", enc(map[string]any{"fake": "dgx9000"}), `fake = "dgx9000": want "" (real NVML) or one of dgxa100, dgxh100, dgxh200, dgxb200`},
		{"negative XID", enc(map[string]any{"xid_ignore": []int{-1}}), "xid_ignore: -1 is negative"},
		{"not a map", []byte{0xc3}, "not a msgpack map"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Decode error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeIgnoresUnknownKeys(t *testing.T) {
	b, _ := msgpack.Marshal(map[string]any{"future_option": 3, "fake": "dgxh100"})
	c, err := Decode(b)
	if err != nil || c.Fake != "dgxh100" {
		t.Fatalf("Decode = %+v, %v", c, err)
	}
}

func TestSchemaHasADefaultForEveryAttribute(t *testing.T) {
	attrs := Schema().GetObject().GetAttributes()
	if len(attrs) != len(schemaAttrs()) {
		t.Fatalf("schema has %d attributes, want %d", len(attrs), len(schemaAttrs()))
	}
	for name, s := range attrs {
		d := s.GetDefault()
		if d == nil || d.GetPrimary().GetAttr().GetName() != name || d.GetDefault().GetLiteral().GetValue() == "" {
			t.Errorf("attribute %q: want Default{Attr{name:%q}, Literal}, got %v", name, name, s)
		}
	}
	if got := attrs["xid_ignore"].GetDefault().GetDefault().GetLiteral().GetValue(); got != "[13, 31, 43, 45, 68, 109]" {
		t.Errorf("xid_ignore default = %q", got)
	}
}
