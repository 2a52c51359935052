package device

import (
	"strings"
	"testing"

	devicepb "github.com/allot-sched/allot/nvplugin/proto/device"
	structspb "github.com/allot-sched/allot/nvplugin/proto/structs"
)

func TestValidateAppliesNomadsRules(t *testing.T) {
	group := func(attrs map[string]*structspb.Attribute) *devicepb.FingerprintResponse {
		return &devicepb.FingerprintResponse{DeviceGroup: []*devicepb.DeviceGroup{{
			Vendor: "nvidia", DeviceType: "gpu", DeviceName: "H100",
			Devices: []*devicepb.DetectedDevice{{ID: "GPU-1", Healthy: true}}, Attributes: attrs,
		}}}
	}
	tests := []struct {
		name    string
		resp    *devicepb.FingerprintResponse
		wantErr string
	}{
		{"an empty snapshot is valid", &devicepb.FingerprintResponse{}, ""},
		{"MiB on an int is valid", group(map[string]*structspb.Attribute{"memory": intAttr(1, "MiB")}), ""},
		{"MB/s on an int is valid", group(map[string]*structspb.Attribute{"pci_bandwidth": intAttr(1, "MB/s")}), ""},
		{"a percent unit is refused", group(map[string]*structspb.Attribute{"util": intAttr(1, "%")}), `unit "%" is not one Nomad accepts`},
		{"Celsius is refused", group(map[string]*structspb.Attribute{"temp": intAttr(1, "C")}), `unit "C"`},
		{"a unit on a string is refused", group(map[string]*structspb.Attribute{"v": {Value: &structspb.Attribute_StringVal{StringVal: "x"}, Unit: "MiB"}}), "non-numeric"},
		{"an attribute without value is refused", group(map[string]*structspb.Attribute{"v": {}}), "no value"},
		{"an instance without ID is refused", &devicepb.FingerprintResponse{DeviceGroup: []*devicepb.DeviceGroup{{
			Vendor: "nvidia", DeviceType: "gpu", DeviceName: "H100", Devices: []*devicepb.DetectedDevice{{}}}}}, "has no ID"},
		{"a group without name is refused", &devicepb.FingerprintResponse{DeviceGroup: []*devicepb.DeviceGroup{{Vendor: "nvidia", DeviceType: "gpu"}}}, "must be non-empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.resp)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
