package device

import (
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/allot-sched/allot/nvplugin/nvml"
	devicepb "github.com/allot-sched/allot/nvplugin/proto/device"
	structspb "github.com/allot-sched/allot/nvplugin/proto/structs"
)

// defaultStatsInterval is what Nomad's own plugin SDK uses for a zero
// collection_interval.
const defaultStatsInterval = time.Second

// Stats sends one round of telemetry for every reported GPU each interval,
// every entry timestamped; unreadable values are "N/A". The stream ends only
// when its context does.
func (p *Plugin) Stats(req *devicepb.StatsRequest, stream devicepb.DevicePlugin_StatsServer) error {
	interval := req.GetCollectionInterval().AsDuration()
	if interval <= 0 {
		interval = defaultStatsInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if resp := p.collect(); len(resp.GetGroups()) > 0 {
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-ticker.C:
		}
	}
}

// collect samples every GPU of the current device set.
func (p *Plugin) collect() *devicepb.StatsResponse {
	fp := p.snapshot()
	p.mu.Lock()
	drv := p.drv
	p.mu.Unlock()
	resp := &devicepb.StatsResponse{}
	if drv == nil {
		return resp
	}
	for _, g := range fp.GetDeviceGroup() {
		gs := &devicepb.DeviceGroupStats{Vendor: g.GetVendor(), Type: g.GetDeviceType(), Name: g.GetDeviceName(),
			InstanceStats: map[string]*devicepb.DeviceStats{}}
		for _, d := range g.GetDevices() {
			gs.InstanceStats[d.GetID()] = DeviceStats(drv.Sample(d.GetID()), p.now())
		}
		resp.Groups = append(resp.Groups, gs)
	}
	return resp
}

func na(desc string) *structspb.StatValue {
	return &structspb.StatValue{StringVal: wrapperspb.String("N/A"), Desc: desc}
}

func intStat(v *int64, unit, desc string) *structspb.StatValue {
	if v == nil {
		return na(desc)
	}
	return &structspb.StatValue{IntNumeratorVal: wrapperspb.Int64(*v), Unit: unit, Desc: desc}
}

// DeviceStats renders one sample. Power is in watts throughout (Nomad's nvidia
// plugin mixes mW and W); the summary is memory used / total, as in Nomad's.
func DeviceStats(s nvml.Sample, at time.Time) *devicepb.DeviceStats {
	mem := na("GPU memory used / total")
	if s.MemUsedMiB != nil && s.MemTotalMiB != nil {
		mem = &structspb.StatValue{IntNumeratorVal: wrapperspb.Int64(*s.MemUsedMiB),
			IntDenominatorVal: wrapperspb.Int64(*s.MemTotalMiB), Unit: "MiB", Desc: "GPU memory used / total"}
	}
	power := na("power draw")
	if s.PowerW != nil {
		power = &structspb.StatValue{FloatNumeratorVal: wrapperspb.Double(*s.PowerW), Unit: "W", Desc: "power draw"}
	}
	attrs := map[string]*structspb.StatValue{
		"GPU utilization":        intStat(s.GPUUtilPct, "%", "share of time a kernel ran"),
		"Memory utilization":     intStat(s.MemUtilPct, "%", "share of time memory was read or written"),
		"Memory state":           mem,
		"Power usage":            power,
		"Temperature":            intStat(s.TemperatureC, "C", "GPU core temperature"),
		"ECC errors corrected":   intStat(s.ECCCorrected, "#", "corrected ECC errors since driver load or GPU reset"),
		"ECC errors uncorrected": intStat(s.ECCUncorrected, "#", "uncorrectable ECC errors since driver load or GPU reset"),
	}
	return &devicepb.DeviceStats{Summary: mem, Stats: &structspb.StatObject{Attributes: attrs}, Timestamp: timestamppb.New(at)}
}

// statKeys lists a stats tree's keys in order, for printing.
func statKeys(o *structspb.StatObject) []string {
	keys := make([]string, 0, len(o.GetAttributes()))
	for k := range o.GetAttributes() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
