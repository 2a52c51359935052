package device

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/allot-sched/allot/nvplugin/health"
	"github.com/allot-sched/allot/nvplugin/nvml"
	devicepb "github.com/allot-sched/allot/nvplugin/proto/device"
	structspb "github.com/allot-sched/allot/nvplugin/proto/structs"
)

// xidWaitTimeout bounds one nvmlEventSetWait, so the watcher notices the end
// of the stream; NVIDIA's k8s-device-plugin waits 5 s.
const xidWaitTimeout = time.Second

// Fingerprint sends the complete device set at once (even when empty), then
// again whenever it changed: at each fingerprint period and at once after a
// critical XID. It never sends an error and returns only when the stream's
// context ends; NVML failures are reported as unhealthy instances.
func (p *Plugin) Fingerprint(_ *devicepb.FingerprintRequest, stream devicepb.DevicePlugin_FingerprintServer) error {
	ctx := stream.Context()
	var watched []string
	var last *devicepb.FingerprintResponse
	for {
		resp, gpus := p.poll()
		if p.config().Enabled && !slices.Equal(gpus, watched) {
			p.watchXIDs(ctx, gpus)
			watched = gpus
		}
		if err := p.sendIfChanged(stream, resp, &last); err != nil {
			return err
		}
		timer := time.NewTimer(p.config().Period())
	wait:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
				break wait
			case <-p.changed:
				if err := p.sendIfChanged(stream, p.snapshot(), &last); err != nil {
					timer.Stop()
					return err
				}
			}
		}
	}
}

// sendIfChanged sends resp unless it equals *last, the last message this
// stream sent.
func (p *Plugin) sendIfChanged(stream devicepb.DevicePlugin_FingerprintServer, resp *devicepb.FingerprintResponse, last **devicepb.FingerprintResponse) error {
	if *last != nil && proto.Equal(*last, resp) {
		return nil
	}
	*last = resp
	if err := Validate(resp); err != nil {
		// A message Nomad rejects removes every GPU until the agent restarts.
		p.log.Error("refusing to send an invalid fingerprint", "error", err)
		return nil
	}
	p.log.Debug("fingerprint changed", "groups", len(resp.GetDeviceGroup()))
	return stream.Send(resp)
}

// poll enumerates the GPUs, reads their health and returns the snapshot and
// the sorted UUIDs of the GPUs NVML listed.
func (p *Plugin) poll() (*devicepb.FingerprintResponse, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cfg.Enabled {
		return &devicepb.FingerprintResponse{}, nil
	}
	now := p.now()
	drv := p.driver()
	if err := drv.Init(); err != nil {
		if p.initErr != err.Error() {
			p.log.Error("NVML unavailable; known GPUs reported unhealthy", "error", err)
			p.initErr = err.Error()
		}
		p.tracker.InitFailed(err.Error(), now)
		return p.snapshotLocked(), nil
	}
	p.tracker.InitFailed("", now)
	p.initErr = ""
	inv, err := drv.Inventory()
	if err != nil {
		p.log.Error("GPU enumeration failed; known GPUs reported unhealthy", "error", err)
		for uuid := range p.known {
			p.tracker.Observe(uuid, health.Observation{Err: err.Error()}, now)
		}
		return p.snapshotLocked(), nil
	}
	for _, e := range inv.Errors {
		p.log.Warn("GPU not identified", "error", e)
	}
	p.inv = inv
	seen := map[string]bool{}
	var uuids []string
	for _, g := range inv.GPUs {
		seen[g.UUID] = true
		uuids = append(uuids, g.UUID)
		if prev, ok := p.known[g.UUID]; !ok || (!g.Lost && g.Err == "") {
			p.known[g.UUID] = g
		} else {
			// Keep the attributes read while the GPU answered: changing them on
			// every failure would make Nomad re-evaluate the node.
			prev.Lost, prev.Err = g.Lost, g.Err
			p.known[g.UUID] = prev
		}
		o := drv.Observe(g.UUID)
		o.Lost = o.Lost || g.Lost
		if o.Err == "" {
			o.Err = g.Err
		}
		p.tracker.Observe(g.UUID, o, now)
	}
	for uuid := range p.known {
		if !seen[uuid] {
			p.tracker.Observe(uuid, health.Observation{Lost: true}, now)
		}
	}
	sort.Strings(uuids)
	return p.snapshotLocked(), uuids
}

// watchXIDs starts a goroutine that applies XID events until ctx ends.
func (p *Plugin) watchXIDs(ctx interface{ Done() <-chan struct{} }, gpus []string) {
	p.mu.Lock()
	drv := p.drv
	p.mu.Unlock()
	if drv == nil || len(gpus) == 0 {
		return
	}
	ev, failed, err := drv.WatchXIDs()
	if err != nil {
		p.log.Warn("XID events unavailable; health comes from polling only", "error", err)
		return
	}
	for uuid, e := range failed {
		p.log.Warn("XID events not registered for GPU", "uuid", uuid, "error", e)
	}
	go func() {
		defer ev.Close()
		for {
			select {
			case <-ctx.Done():
				return
			default:
			}
			e, ok, err := ev.Wait(xidWaitTimeout)
			if err != nil {
				p.log.Warn("waiting for XID events failed", "error", err)
				time.Sleep(xidWaitTimeout)
				continue
			}
			if ok {
				p.applyXID(e)
			}
		}
	}()
}

func (p *Plugin) applyXID(e nvml.Event) {
	p.mu.Lock()
	critical := p.tracker.XID(e.UUID, e.XID, p.now())
	p.mu.Unlock()
	p.log.Warn("XID event", "uuid", e.UUID, "xid", e.XID, "meaning", health.XIDName(e.XID), "critical", critical)
	if critical {
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}

func (p *Plugin) snapshot() *devicepb.FingerprintResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotLocked()
}

// snapshotLocked builds the complete device set from every GPU seen so far
// (less the ignored ones). Called with p.mu held.
func (p *Plugin) snapshotLocked() *devicepb.FingerprintResponse {
	if !p.cfg.Enabled {
		return &devicepb.FingerprintResponse{}
	}
	ignored := map[string]bool{}
	for _, id := range p.cfg.IgnoredGPUIDs {
		ignored[id] = true
	}
	var gpus []nvml.GPU
	for uuid, g := range p.known {
		if !ignored[uuid] {
			gpus = append(gpus, g)
		}
	}
	return BuildFingerprint(p.inv, gpus, p.tracker.Status)
}

// groupName is the group a GPU belongs to; NVML names every real GPU.
func groupName(g nvml.GPU) string {
	if g.Name == "" {
		return "N/A"
	}
	return g.Name
}

// BuildFingerprint groups gpus by model (sorted by name, instances by index
// then UUID) with the health statusOf reports for each.
func BuildFingerprint(inv nvml.Inventory, gpus []nvml.GPU, statusOf func(string) health.Status) *devicepb.FingerprintResponse {
	sort.Slice(gpus, func(i, j int) bool {
		if gpus[i].Index != gpus[j].Index {
			return gpus[i].Index < gpus[j].Index
		}
		return gpus[i].UUID < gpus[j].UUID
	})
	groups := map[string]*devicepb.DeviceGroup{}
	var names []string
	for _, g := range gpus {
		name := groupName(g)
		grp, ok := groups[name]
		if !ok {
			grp = &devicepb.DeviceGroup{Vendor: Vendor, DeviceType: Type, DeviceName: name, Attributes: attributes(inv, g)}
			groups[name] = grp
			names = append(names, name)
		}
		st := statusOf(g.UUID)
		d := &devicepb.DetectedDevice{ID: g.UUID, Healthy: st.Healthy, HealthDescription: st.Description}
		if g.PCIBusID != "" {
			d.HwLocality = &devicepb.DeviceLocality{PciBusId: g.PCIBusID}
		}
		grp.Devices = append(grp.Devices, d)
	}
	sort.Strings(names)
	resp := &devicepb.FingerprintResponse{}
	for _, n := range names {
		resp.DeviceGroup = append(resp.DeviceGroup, groups[n])
	}
	return resp
}

func intAttr(v int64, unit string) *structspb.Attribute {
	return &structspb.Attribute{Value: &structspb.Attribute_IntVal{IntVal: v}, Unit: unit}
}

func strAttr(v string) *structspb.Attribute {
	return &structspb.Attribute{Value: &structspb.Attribute_StringVal{StringVal: v}}
}

// attributes are a group's constraint attributes, taken from its first GPU.
// Only values NVML reported are included, and only with Nomad's units.
func attributes(inv nvml.Inventory, g nvml.GPU) map[string]*structspb.Attribute {
	a := map[string]*structspb.Attribute{}
	for _, n := range []struct {
		key  string
		v    int64
		unit string
	}{
		{"memory", g.MemoryMiB, "MiB"},
		{"bar1", g.BAR1MiB, "MiB"},
		{"power", g.PowerLimitW, "W"},
		{"cores_clock", g.MaxGraphicsMHz, "MHz"},
		{"memory_clock", g.MaxMemoryMHz, "MHz"},
		{"pci_bandwidth", g.PCIeMBps, "MB/s"},
	} {
		if n.v > 0 {
			a[n.key] = intAttr(n.v, n.unit)
		}
	}
	for k, v := range map[string]string{
		"driver_version": inv.DriverVersion, "cuda_version": inv.CUDAVersion, "compute_capability": g.ComputeCap,
	} {
		if v != "" {
			a[k] = strAttr(v)
		}
	}
	if g.Persistence != nil {
		a["persistence_mode"] = &structspb.Attribute{Value: &structspb.Attribute_BoolVal{BoolVal: *g.Persistence}}
	}
	return a
}

// validUnits are the attribute units Nomad accepts (case-sensitive);
// anything else makes the client drop every device of the plugin.
var validUnits = map[string]bool{}

func init() {
	for _, u := range []string{
		"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "kB", "KB", "MB", "GB", "TB", "PB", "EB",
		"KiB/s", "MiB/s", "GiB/s", "TiB/s", "PiB/s", "EiB/s", "kB/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s", "EB/s",
		"MHz", "GHz", "mW", "W", "kW", "MW", "GW",
	} {
		validUnits[u] = true
	}
}

// Validate applies the checks the Nomad client applies to every fingerprint
// message: non-empty vendor, type and name; unique groups; instances with IDs;
// attributes with exactly one value and, if any, a known unit on a number.
func Validate(resp *devicepb.FingerprintResponse) error {
	seen := map[string]bool{}
	for _, g := range resp.GetDeviceGroup() {
		if g.GetVendor() == "" || g.GetDeviceType() == "" || g.GetDeviceName() == "" {
			return fmt.Errorf("group %q/%q/%q: vendor, type and name must be non-empty", g.GetVendor(), g.GetDeviceType(), g.GetDeviceName())
		}
		key := g.GetVendor() + "/" + g.GetDeviceType() + "/" + g.GetDeviceName()
		if seen[key] {
			return fmt.Errorf("group %s appears twice", key)
		}
		seen[key] = true
		for i, d := range g.GetDevices() {
			if d.GetID() == "" {
				return fmt.Errorf("group %s: instance %d has no ID", key, i)
			}
		}
		for k, a := range g.GetAttributes() {
			if err := validateAttribute(a); err != nil {
				return fmt.Errorf("group %s: attribute %q: %w", key, k, err)
			}
		}
	}
	return nil
}

func validateAttribute(a *structspb.Attribute) error {
	if a.GetValue() == nil {
		return fmt.Errorf("no value: want exactly one of float, int, string or bool")
	}
	if a.GetUnit() == "" {
		return nil
	}
	if !validUnits[a.GetUnit()] {
		return fmt.Errorf("unit %q is not one Nomad accepts (bytes, byte rates, MHz/GHz, mW..GW)", a.GetUnit())
	}
	switch a.GetValue().(type) {
	case *structspb.Attribute_IntVal, *structspb.Attribute_FloatVal:
		return nil
	}
	return fmt.Errorf("unit %q on a non-numeric value", a.GetUnit())
}
