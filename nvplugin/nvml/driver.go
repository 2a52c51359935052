package nvml

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/allot-sched/allot/nvplugin/health"
)

// ErrNoNVML is returned by Init when the NVML library cannot be loaded (no
// NVIDIA driver on this host).
var ErrNoNVML = errors.New("NVML library libnvidia-ml.so.1 not found (no NVIDIA driver installed?)")

// Inventory is one enumeration of the GPUs.
type Inventory struct {
	DriverVersion string // e.g. "550.54.15"; "" when NVML does not say
	CUDAVersion   string // the driver's CUDA version, e.g. "12.4"; "" when unknown
	GPUs          []GPU
	// Errors are enumeration failures for GPUs that could not even be identified.
	Errors []string
}

// GPU is what enumeration learnt about one GPU. Numbers are 0 when NVML does
// not support the query.
type GPU struct {
	Index          int
	Minor          int // /dev/nvidia<Minor>; -1 when unknown
	UUID           string
	Name           string
	PCIBusID       string // sysfs form: lower-case, 4-digit domain, e.g. "0000:3b:00.0"
	MemoryMiB      int64
	BAR1MiB        int64
	PowerLimitW    int64
	MaxGraphicsMHz int64
	MaxMemoryMHz   int64
	ComputeCap     string // e.g. "9.0"
	PCIeMBps       int64  // max link width × per-lane rate of the max generation
	Persistence    *bool
	// Lost is set when NVML answered ERROR_GPU_IS_LOST; Err holds another failure.
	Lost bool
	Err  string
}

// Sample is one round of telemetry; nil means not supported or not readable.
type Sample struct {
	GPUUtilPct     *int64
	MemUtilPct     *int64
	MemUsedMiB     *int64
	MemTotalMiB    *int64
	PowerW         *float64
	TemperatureC   *int64
	ECCCorrected   *int64
	ECCUncorrected *int64
}

// Driver reads GPUs through an nvml.Interface: the real library or a fake
// machine. Its methods are safe for concurrent use.
type Driver struct {
	lib  gonvml.Interface
	fake *fakeMachine

	mu      sync.Mutex
	inited  bool
	handles map[string]gonvml.Device
}

// Real returns a Driver over the host's NVML library (loaded by Init).
func Real() *Driver {
	return &Driver{lib: gonvml.New(), handles: map[string]gonvml.Device{}}
}

// IsFake reports whether the Driver serves a fake machine.
func (d *Driver) IsFake() bool { return d.fake != nil }

// Init initialises NVML; it is cheap to call again once it succeeded.
func (d *Driver) Init() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inited {
		return nil
	}
	switch ret := d.lib.Init(); ret {
	case gonvml.SUCCESS:
		d.inited = true
		return nil
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return ErrNoNVML
	default:
		return fmt.Errorf("nvmlInit: %s", errString(ret))
	}
}

// Shutdown releases NVML if Init succeeded.
func (d *Driver) Shutdown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inited {
		d.lib.Shutdown()
		d.inited = false
	}
}

func errString(ret gonvml.Return) string {
	if s := gonvml.ErrorString(ret); s != "" && !strings.HasPrefix(s, "Unknown Error") {
		return s
	}
	return fmt.Sprintf("NVML return code %d", int32(ret))
}

// Inventory enumerates the GPUs. It fails only when the GPU count cannot be
// read; per-GPU failures are reported on the GPU or in Inventory.Errors.
func (d *Driver) Inventory() (Inventory, error) {
	var inv Inventory
	if v, ret := d.lib.SystemGetDriverVersion(); ret == gonvml.SUCCESS {
		inv.DriverVersion = v
	}
	if v, ret := d.lib.SystemGetCudaDriverVersion(); ret == gonvml.SUCCESS {
		inv.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	n, ret := d.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return inv, fmt.Errorf("nvmlDeviceGetCount: %s", errString(ret))
	}
	handles := map[string]gonvml.Device{}
	for i := 0; i < n; i++ {
		dev, ret := d.lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			inv.Errors = append(inv.Errors, fmt.Sprintf("GPU index %d: nvmlDeviceGetHandleByIndex: %s", i, errString(ret)))
			continue
		}
		uuid, ret := dev.GetUUID()
		if ret != gonvml.SUCCESS {
			inv.Errors = append(inv.Errors, fmt.Sprintf("GPU index %d: nvmlDeviceGetUUID: %s", i, errString(ret)))
			continue
		}
		handles[uuid] = dev
		inv.GPUs = append(inv.GPUs, describe(i, uuid, dev))
	}
	d.mu.Lock()
	d.handles = handles
	d.mu.Unlock()
	return inv, nil
}

// reading collects the outcome of several NVML calls on one GPU.
type reading struct {
	lost bool
	errs []string
}

// ok reports whether ret is a value to use; it records lost GPUs and real
// errors, and treats NOT_SUPPORTED as "no value".
func (r *reading) ok(call string, ret gonvml.Return) bool {
	switch ret {
	case gonvml.SUCCESS:
		return true
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_NO_PERMISSION:
		return false
	case gonvml.ERROR_GPU_IS_LOST:
		r.lost = true
	default:
		r.errs = append(r.errs, call+": "+errString(ret))
	}
	return false
}

func describe(index int, uuid string, dev gonvml.Device) GPU {
	g := GPU{Index: index, UUID: uuid, Minor: -1}
	var r reading
	if v, ret := dev.GetName(); r.ok("GetName", ret) {
		g.Name = v
	}
	if v, ret := dev.GetMinorNumber(); r.ok("GetMinorNumber", ret) {
		g.Minor = v
	}
	if p, ret := dev.GetPciInfo(); r.ok("GetPciInfo", ret) {
		g.PCIBusID = busID(p)
	}
	if m, ret := dev.GetMemoryInfo(); r.ok("GetMemoryInfo", ret) {
		g.MemoryMiB = int64(m.Total >> 20)
	}
	if m, ret := dev.GetBAR1MemoryInfo(); r.ok("GetBAR1MemoryInfo", ret) {
		g.BAR1MiB = int64(m.Bar1Total >> 20)
	}
	if v, ret := dev.GetPowerManagementLimit(); r.ok("GetPowerManagementLimit", ret) {
		g.PowerLimitW = int64(v / 1000)
	}
	if v, ret := dev.GetMaxClockInfo(gonvml.CLOCK_GRAPHICS); r.ok("GetMaxClockInfo", ret) {
		g.MaxGraphicsMHz = int64(v)
	}
	if v, ret := dev.GetMaxClockInfo(gonvml.CLOCK_MEM); r.ok("GetMaxClockInfo", ret) {
		g.MaxMemoryMHz = int64(v)
	}
	if major, minor, ret := dev.GetCudaComputeCapability(); r.ok("GetCudaComputeCapability", ret) {
		g.ComputeCap = fmt.Sprintf("%d.%d", major, minor)
	}
	g.PCIeMBps = pcieBandwidth(dev, &r)
	if v, ret := dev.GetPersistenceMode(); r.ok("GetPersistenceMode", ret) {
		on := v == gonvml.FEATURE_ENABLED
		g.Persistence = &on
	}
	g.Lost, g.Err = r.lost, strings.Join(r.errs, "; ")
	return g
}

// pcieLaneMBps is the usable bandwidth of one lane per PCIe generation, in MB/s,
// as Nomad's nvidia plugin reports it (gen3 1024 ... gen6 4096).
var pcieLaneMBps = map[int]int64{1: 250, 2: 500, 3: 1024, 4: 2048, 5: 3072, 6: 4096}

func pcieBandwidth(dev gonvml.Device, r *reading) int64 {
	gen, ret := dev.GetMaxPcieLinkGeneration()
	if !r.ok("GetMaxPcieLinkGeneration", ret) {
		return 0
	}
	width, ret := dev.GetMaxPcieLinkWidth()
	if !r.ok("GetMaxPcieLinkWidth", ret) {
		return 0
	}
	return pcieLaneMBps[gen] * int64(width)
}

// busID turns NVML's fixed, NUL-padded "00000000:3B:00.0" into the sysfs form
// "0000:3b:00.0" that Nomad compares with /sys/bus/pci/devices for NUMA placement.
func busID(p gonvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	s := strings.ToLower(b.String())
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) == 8 && strings.HasPrefix(dom, "0000") {
		s = dom[4:] + ":" + rest
	}
	return s
}

func (d *Driver) handle(uuid string) (gonvml.Device, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.handles[uuid]
	return h, ok
}

// Observe reads the health-relevant state of GPU uuid. A GPU missing from the
// last Inventory is reported lost.
func (d *Driver) Observe(uuid string) health.Observation {
	if d.fake != nil {
		d.fake.refresh()
	}
	dev, ok := d.handle(uuid)
	if !ok {
		return health.Observation{Lost: true}
	}
	var r reading
	var o health.Observation
	if v, ret := dev.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC); r.ok("GetTotalEccErrors", ret) {
		o.UncorrectedECC = &v
	}
	if _, _, pending, failed, ret := dev.GetRemappedRows(); r.ok("GetRemappedRows", ret) {
		o.RowRemapPending, o.RowRemapFailure = pending, failed
	}
	if v, ret := dev.GetRetiredPagesPendingStatus(); r.ok("GetRetiredPagesPendingStatus", ret) {
		o.RetiredPagesPending = v == gonvml.FEATURE_ENABLED
	}
	if v, ret := dev.GetTotalEnergyConsumption(); r.ok("GetTotalEnergyConsumption", ret) {
		o.EnergyMJ = &v
	}
	o.Lost, o.Err = r.lost, strings.Join(r.errs, "; ")
	return o
}

// Sample reads one round of telemetry of GPU uuid; unreadable values stay nil.
func (d *Driver) Sample(uuid string) Sample {
	var s Sample
	dev, ok := d.handle(uuid)
	if !ok {
		return s
	}
	i64 := func(v int64) *int64 { return &v }
	var r reading
	if u, ret := dev.GetUtilizationRates(); r.ok("", ret) {
		s.GPUUtilPct, s.MemUtilPct = i64(int64(u.Gpu)), i64(int64(u.Memory))
	}
	if m, ret := dev.GetMemoryInfo(); r.ok("", ret) {
		s.MemUsedMiB, s.MemTotalMiB = i64(int64(m.Used>>20)), i64(int64(m.Total>>20))
	}
	if p, ret := dev.GetPowerUsage(); r.ok("", ret) {
		w := float64(p) / 1000
		s.PowerW = &w
	}
	if t, ret := dev.GetTemperature(gonvml.TEMPERATURE_GPU); r.ok("", ret) {
		s.TemperatureC = i64(int64(t))
	}
	if v, ret := dev.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.VOLATILE_ECC); r.ok("", ret) {
		s.ECCCorrected = i64(int64(v))
	}
	if v, ret := dev.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC); r.ok("", ret) {
		s.ECCUncorrected = i64(int64(v))
	}
	return s
}
