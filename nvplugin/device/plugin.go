package device

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allot-sched/allot/nvplugin/config"
	"github.com/allot-sched/allot/nvplugin/health"
	"github.com/allot-sched/allot/nvplugin/nvml"
	basepb "github.com/allot-sched/allot/nvplugin/proto/base"
	devicepb "github.com/allot-sched/allot/nvplugin/proto/device"
)

const (
	// Name is the plugin's name: the binary, the `plugin` block label and
	// PluginInfo.name are all this, so Nomad's lookups by file name and by
	// plugin name agree.
	Name = "allot-nvml"
	// APIVersion is the only device-plugin API version Nomad speaks (since 0.9).
	APIVersion = "v0.1.0"
	// Vendor and Type make existing `device "nvidia/gpu"` requests match.
	Vendor = "nvidia"
	Type   = "gpu"
)

// Plugin implements Nomad's BasePlugin and DevicePlugin services. Nomad starts
// the binary several times and calls SetConfig more than once, so construction
// and SetConfig never touch NVML; the first Fingerprint opens it.
type Plugin struct {
	log     hclog.Logger
	version string
	now     func() time.Time
	seed    string // default fake seed: the host name

	mu      sync.Mutex
	cfg     config.Config
	drv     *nvml.Driver
	tracker *health.Tracker
	known   map[string]nvml.GPU // every GPU seen since start, by UUID
	inv     nvml.Inventory
	initErr string
	changed chan struct{} // poked when an XID changed health
}

// New returns a Plugin with the default configuration. version must parse as
// a go-version version (Nomad refuses to load the plugin otherwise).
func New(log hclog.Logger, version string, now func() time.Time) *Plugin {
	host, _ := os.Hostname()
	cfg := config.Default()
	return &Plugin{
		log: log, version: version, now: now, seed: host, cfg: cfg,
		tracker: health.NewTracker(cfg.Policy()), known: map[string]nvml.GPU{},
		changed: make(chan struct{}, 1),
	}
}

// PluginInfo reports a device plugin speaking API v0.1.0.
func (p *Plugin) PluginInfo(context.Context, *basepb.PluginInfoRequest) (*basepb.PluginInfoResponse, error) {
	return &basepb.PluginInfoResponse{
		Type: basepb.PluginType_DEVICE, PluginApiVersions: []string{APIVersion}, PluginVersion: p.version, Name: Name,
	}, nil
}

// ConfigSchema returns the config schema with every default.
func (p *Plugin) ConfigSchema(context.Context, *basepb.ConfigSchemaRequest) (*basepb.ConfigSchemaResponse, error) {
	return &basepb.ConfigSchemaResponse{Spec: config.Schema()}, nil
}

// SetConfig decodes and stores the config. It is idempotent, ignores
// nomad_config, and fails only on invalid config (which stops the Nomad client,
// so the message says what would be valid).
func (p *Plugin) SetConfig(_ context.Context, req *basepb.SetConfigRequest) (*basepb.SetConfigResponse, error) {
	cfg, err := config.Decode(req.GetMsgpackConfig())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "allot-nvml config: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cfg.Fake != p.cfg.Fake || cfg.FakeSeed != p.cfg.FakeSeed || cfg.FakeStateDir != p.cfg.FakeStateDir {
		if p.drv != nil {
			p.drv.Shutdown()
			p.drv = nil
		}
	}
	p.cfg = cfg
	p.tracker.SetPolicy(cfg.Policy())
	return &basepb.SetConfigResponse{}, nil
}

// config returns the current config.
func (p *Plugin) config() config.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// driver returns the NVML driver, opening it on first use. Called with p.mu held.
func (p *Plugin) driver() *nvml.Driver {
	if p.drv != nil {
		return p.drv
	}
	if p.cfg.Fake == "" {
		p.drv = nvml.Real()
		p.log.Info("using the host's NVML")
		return p.drv
	}
	seed := p.cfg.FakeSeed
	if seed == "" {
		seed = p.seed
	}
	drv, err := nvml.Fake(p.cfg.Fake, seed, p.cfg.FakeStateDir, p.now)
	if err != nil { // config.Validate already refused unknown machines
		panic(fmt.Sprintf("allot-nvml: validated fake machine refused: %v", err))
	}
	p.log.Warn("FAKE GPUs: serving a simulated machine for tests and demos, not real NVML",
		"fake", p.cfg.Fake, "seed", seed, "state_dir", p.cfg.FakeStateDir)
	p.drv = drv
	return drv
}

// Close releases NVML.
func (p *Plugin) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drv != nil {
		p.drv.Shutdown()
	}
}

// baseServer and deviceServer adapt Plugin to the generated service interfaces
// (one type each: both Unimplemented structs define the same private method).
type baseServer struct {
	basepb.UnimplementedBasePluginServer
	*Plugin
}

func (s baseServer) PluginInfo(ctx context.Context, req *basepb.PluginInfoRequest) (*basepb.PluginInfoResponse, error) {
	return s.Plugin.PluginInfo(ctx, req)
}

func (s baseServer) ConfigSchema(ctx context.Context, req *basepb.ConfigSchemaRequest) (*basepb.ConfigSchemaResponse, error) {
	return s.Plugin.ConfigSchema(ctx, req)
}

func (s baseServer) SetConfig(ctx context.Context, req *basepb.SetConfigRequest) (*basepb.SetConfigResponse, error) {
	return s.Plugin.SetConfig(ctx, req)
}

type deviceServer struct {
	devicepb.UnimplementedDevicePluginServer
	*Plugin
}

func (s deviceServer) Fingerprint(req *devicepb.FingerprintRequest, stream devicepb.DevicePlugin_FingerprintServer) error {
	return s.Plugin.Fingerprint(req, stream)
}

func (s deviceServer) Reserve(ctx context.Context, req *devicepb.ReserveRequest) (*devicepb.ReserveResponse, error) {
	return s.Plugin.Reserve(ctx, req)
}

func (s deviceServer) Stats(req *devicepb.StatsRequest, stream devicepb.DevicePlugin_StatsServer) error {
	return s.Plugin.Stats(req, stream)
}
