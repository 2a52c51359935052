package device

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/allot-sched/allot/nvplugin/health"
	"github.com/allot-sched/allot/nvplugin/nvml"
	structspb "github.com/allot-sched/allot/nvplugin/proto/structs"
)

// ErrNoGPUs is returned by Probe when NVML works but lists no GPU.
var ErrNoGPUs = errors.New("NVML found no GPUs on this host")

// Probe fingerprints the GPUs through drv without Nomad and prints the device
// groups, their attributes (checked against Nomad's unit rules), each GPU's
// health and one round of stats. It fails when NVML cannot be loaded, lists no
// GPU, or the fingerprint would be refused by Nomad.
func Probe(w io.Writer, drv *nvml.Driver, policy health.Policy, now func() time.Time) error {
	if err := drv.Init(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer drv.Shutdown()
	inv, err := drv.Inventory()
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	for _, e := range inv.Errors {
		fmt.Fprintf(w, "warning: %s\n", e)
	}
	if len(inv.GPUs) == 0 {
		return fmt.Errorf("probe: %w", ErrNoGPUs)
	}
	tr := health.NewTracker(policy)
	for _, g := range inv.GPUs {
		o := drv.Observe(g.UUID)
		o.Lost = o.Lost || g.Lost
		if o.Err == "" {
			o.Err = g.Err
		}
		tr.Observe(g.UUID, o, now())
	}
	fp := BuildFingerprint(inv, inv.GPUs, tr.Status)
	if drv.IsFake() {
		fmt.Fprintln(w, "FAKE machine (go-nvml mock), not real GPUs")
	}
	fmt.Fprintf(w, "driver %s, CUDA %s, %d GPUs in %d groups\n", inv.DriverVersion, inv.CUDAVersion, len(inv.GPUs), len(fp.GetDeviceGroup()))
	for _, g := range fp.GetDeviceGroup() {
		fmt.Fprintf(w, "\ngroup %s/%s/%s\n", g.GetVendor(), g.GetDeviceType(), g.GetDeviceName())
		keys := make([]string, 0, len(g.GetAttributes()))
		for k := range g.GetAttributes() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  attr %-20s %s\n", k, renderAttr(g.GetAttributes()[k]))
		}
		for _, d := range g.GetDevices() {
			h := "healthy"
			if !d.GetHealthy() {
				h = "UNHEALTHY: " + d.GetHealthDescription()
			}
			fmt.Fprintf(w, "  instance %s  pci %s  %s\n", d.GetID(), d.GetHwLocality().GetPciBusId(), h)
			st := DeviceStats(drv.Sample(d.GetID()), now())
			for _, k := range statKeys(st.GetStats()) {
				fmt.Fprintf(w, "    stat %-24s %s\n", k, renderStat(st.GetStats().GetAttributes()[k]))
			}
		}
	}
	if err := Validate(fp); err != nil {
		return fmt.Errorf("probe: Nomad would refuse this fingerprint: %w", err)
	}
	fmt.Fprintln(w, "\nfingerprint valid for Nomad (names, IDs, attribute values and units checked)")
	return nil
}

func renderAttr(a *structspb.Attribute) string {
	var v string
	switch x := a.GetValue().(type) {
	case *structspb.Attribute_IntVal:
		v = fmt.Sprint(x.IntVal)
	case *structspb.Attribute_FloatVal:
		v = fmt.Sprint(x.FloatVal)
	case *structspb.Attribute_StringVal:
		v = fmt.Sprintf("%q", x.StringVal)
	case *structspb.Attribute_BoolVal:
		v = fmt.Sprint(x.BoolVal)
	}
	if a.GetUnit() != "" {
		v += " " + a.GetUnit()
	}
	return v
}

func renderStat(s *structspb.StatValue) string {
	var v string
	switch {
	case s.GetStringVal() != nil:
		v = s.GetStringVal().GetValue()
	case s.GetIntNumeratorVal() != nil && s.GetIntDenominatorVal() != nil:
		v = fmt.Sprintf("%d / %d", s.GetIntNumeratorVal().GetValue(), s.GetIntDenominatorVal().GetValue())
	case s.GetIntNumeratorVal() != nil:
		v = fmt.Sprint(s.GetIntNumeratorVal().GetValue())
	case s.GetFloatNumeratorVal() != nil:
		v = fmt.Sprintf("%.1f", s.GetFloatNumeratorVal().GetValue())
	}
	if s.GetUnit() != "" {
		v += " " + s.GetUnit()
	}
	return v
}
