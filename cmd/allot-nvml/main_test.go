package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/allot-sched/allot/nvplugin/device"
	basepb "github.com/allot-sched/allot/nvplugin/proto/base"
	devicepb "github.com/allot-sched/allot/nvplugin/proto/device"
)

// pluginBin is the allot-nvml binary built once for all tests.
var pluginBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "allot-nvml-test")
	if err != nil {
		panic(err)
	}
	pluginBin = filepath.Join(dir, "allot-nvml")
	if out, err := exec.Command("go", "build", "-o", pluginBin, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("go build allot-nvml: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects the plugin's log lines as go-plugin re-logs them.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type conn struct {
	base basepb.BasePluginClient
	dev  devicepb.DevicePluginClient
	logs *syncBuffer
}

// launch starts the binary through go-plugin's client with Nomad's handshake
// and dispenses both services, as a Nomad client does.
func launch(t *testing.T) conn {
	t.Helper()
	logs := &syncBuffer{}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  device.Handshake,
		Plugins:          device.PluginSet(),
		Cmd:              exec.Command(pluginBin),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	b, err := rpc.Dispense("base")
	if err != nil {
		t.Fatal(err)
	}
	d, err := rpc.Dispense("device")
	if err != nil {
		t.Fatal(err)
	}
	return conn{base: b.(basepb.BasePluginClient), dev: d.(devicepb.DevicePluginClient), logs: logs}
}

// callBound bounds a call, a stream or a wait for the plugin's log.
const callBound = 2 * time.Minute

// ctx bounds a call or stream so a hung plugin fails the test instead of
// hanging it. It is no timing assertion: a fingerprint stream lives for the
// whole of a test that runs several `allot-nvml inject` processes, which took
// over 30 s under -race on a shared 2-core machine at load 14.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callBound)
	t.Cleanup(cancel)
	return c
}

// waitLog waits until the plugin's log holds want. The plugin writes the
// line to its stderr before it answers, but go-plugin's client copies stderr
// into the logger on a goroutine of its own, so the line can reach logs after
// the answer has reached the test (under load it did, 1 run in 10).
func waitLog(t *testing.T, c conn, want string) {
	t.Helper()
	deadline := time.Now().Add(callBound)
	for !strings.Contains(c.logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q line in the plugin log within %v:\n%s", want, callBound, c.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func setConfig(t *testing.T, c conn, cfg map[string]any) {
	t.Helper()
	b, err := msgpack.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.base.SetConfig(ctx(t), &basepb.SetConfigRequest{MsgpackConfig: b, PluginApiVersion: device.APIVersion}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
}

func TestInfoAndSchema(t *testing.T) {
	c := launch(t)
	info, err := c.base.PluginInfo(ctx(t), &basepb.PluginInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetType() != basepb.PluginType_DEVICE || strings.Join(info.GetPluginApiVersions(), ",") != "v0.1.0" ||
		info.GetPluginVersion() != PluginVersion || info.GetName() != "allot-nvml" {
		t.Fatalf("PluginInfo = %v", info)
	}
	schema, err := c.base.ConfigSchema(ctx(t), &basepb.ConfigSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	attrs := schema.GetSpec().GetObject().GetAttributes()
	for _, k := range []string{"enabled", "ignored_gpu_ids", "fingerprint_period", "xid_ignore", "check_ecc", "check_row_remap", "fake", "fake_seed", "fake_state_dir"} {
		if attrs[k].GetDefault().GetDefault().GetLiteral() == nil {
			t.Errorf("schema attribute %q has no default literal: %v", k, attrs[k])
		}
	}
}

func TestSetConfigGoldenVectors(t *testing.T) {
	c := launch(t)
	for _, v := range []string{
		"84a7656e61626c6564c3b266696e6765727072696e745f706572696f64a2316daf69676e6f7265645f6770755f69647390aa7869645f69676e6f7265920d1f",
		"84a7656e61626c6564c2b266696e6765727072696e745f706572696f64a23573af69676e6f7265645f6770755f69647392a54750552d61a54750552d62aa7869645f69676e6f7265912b",
		"",
	} {
		b, _ := hex.DecodeString(v)
		for i := 0; i < 2; i++ { // Nomad calls SetConfig twice with the same bytes
			if _, err := c.base.SetConfig(ctx(t), &basepb.SetConfigRequest{MsgpackConfig: b, PluginApiVersion: "v0.1.0"}); err != nil {
				t.Fatalf("SetConfig(%s) #%d: %v", v, i, err)
			}
		}
	}
	bad, _ := msgpack.Marshal(map[string]any{"fingerprint_period": "often"})
	_, err := c.base.SetConfig(ctx(t), &basepb.SetConfigRequest{MsgpackConfig: bad})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `fingerprint_period = "often"`) {
		t.Fatalf("bad config: %v", err)
	}
}

func recvFP(t *testing.T, s devicepb.DevicePlugin_FingerprintClient) *devicepb.FingerprintResponse {
	t.Helper()
	r, err := s.Recv()
	if err != nil {
		t.Fatalf("fingerprint stream: %v", err)
	}
	return r
}

func injectCLI(t *testing.T, dir string, args ...string) {
	t.Helper()
	out, err := exec.Command(pluginBin, append([]string{"inject", "-state", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("allot-nvml inject %v: %v\n%s", args, err, out)
	}
}

func TestFingerprintFaultAndRecovery(t *testing.T) {
	c := launch(t)
	dir := t.TempDir()
	setConfig(t, c, map[string]any{"fake": "dgxh100", "fake_seed": "node-a", "fake_state_dir": dir, "fingerprint_period": "100ms"})
	stream, err := c.dev.Fingerprint(ctx(t), &devicepb.FingerprintRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first := recvFP(t, stream)
	if len(first.GetDeviceGroup()) != 1 {
		t.Fatalf("want one group, got %v", first)
	}
	g := first.GetDeviceGroup()[0]
	if g.GetVendor() != "nvidia" || g.GetDeviceType() != "gpu" || g.GetDeviceName() != "NVIDIA H100 80GB HBM3" || len(g.GetDevices()) != 8 {
		t.Fatalf("group = %s/%s/%s with %d devices", g.GetVendor(), g.GetDeviceType(), g.GetDeviceName(), len(g.GetDevices()))
	}
	if m := g.GetAttributes()["memory"]; m.GetIntVal() != 81920 || m.GetUnit() != "MiB" {
		t.Fatalf("memory attribute = %v", m)
	}
	if err := device.Validate(first); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.GetDevices() {
		if !d.GetHealthy() || !strings.HasPrefix(d.GetID(), "GPU-") || len(d.GetHwLocality().GetPciBusId()) != len("0000:18:00.0") {
			t.Fatalf("instance = %v", d)
		}
	}
	waitLog(t, c, "FAKE GPUs")
	victim := g.GetDevices()[3].GetID()

	injectCLI(t, dir, "xid", "79", victim)
	d := deviceOf(t, recvFP(t, stream), victim)
	if d.GetHealthy() || !strings.HasPrefix(d.GetHealthDescription(), "XID 79 (GPU has fallen off the bus) at 20") {
		t.Fatalf("after XID 79: %v", d)
	}

	injectCLI(t, dir, "clear", victim) // a simulated GPU reset
	if d := deviceOf(t, recvFP(t, stream), victim); !d.GetHealthy() || d.GetHealthDescription() != "" {
		t.Fatalf("after reset: %v", d)
	}

	injectCLI(t, dir, "remap", "pending", victim)
	if d := deviceOf(t, recvFP(t, stream), victim); d.GetHealthy() || !strings.HasPrefix(d.GetHealthDescription(), "row remap pending") {
		t.Fatalf("after remap pending: %v", d)
	}
	injectCLI(t, dir, "clear")
	if d := deviceOf(t, recvFP(t, stream), victim); !d.GetHealthy() {
		t.Fatalf("after clear: %v", d)
	}
}

func deviceOf(t *testing.T, r *devicepb.FingerprintResponse, id string) *devicepb.DetectedDevice {
	t.Helper()
	for _, g := range r.GetDeviceGroup() {
		for _, d := range g.GetDevices() {
			if d.GetID() == id {
				return d
			}
		}
	}
	t.Fatalf("instance %s missing from %v", id, r)
	return nil
}

func TestFingerprintDisabledSendsEmptyFirstMessage(t *testing.T) {
	c := launch(t)
	setConfig(t, c, map[string]any{"enabled": false, "fake": "dgxh100"})
	stream, err := c.dev.Fingerprint(ctx(t), &devicepb.FingerprintRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r := recvFP(t, stream); len(r.GetDeviceGroup()) != 0 {
		t.Fatalf("disabled plugin reported %v", r)
	}
}

func TestInstanceIDsStableAcrossRestartsAndUniquePerSeed(t *testing.T) {
	ids := func(seed string) []string {
		c := launch(t)
		setConfig(t, c, map[string]any{"fake": "dgxh100", "fake_seed": seed})
		s, err := c.dev.Fingerprint(ctx(t), &devicepb.FingerprintRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range recvFP(t, s).GetDeviceGroup()[0].GetDevices() {
			out = append(out, d.GetID())
		}
		return out
	}
	a1, a2, b := ids("host-a"), ids("host-a"), ids("host-b")
	if strings.Join(a1, ",") != strings.Join(a2, ",") {
		t.Fatalf("same seed, different IDs after restart: %v vs %v", a1, a2)
	}
	if a1[0] == b[0] {
		t.Fatalf("different seeds share ID %s", a1[0])
	}
}

func TestReserveAndStats(t *testing.T) {
	c := launch(t)
	setConfig(t, c, map[string]any{"fake": "dgxh100", "fake_seed": "node-r"})
	stream, err := c.dev.Fingerprint(ctx(t), &devicepb.FingerprintRequest{})
	if err != nil {
		t.Fatal(err)
	}
	devs := recvFP(t, stream).GetDeviceGroup()[0].GetDevices()
	ids := []string{devs[5].GetID(), devs[1].GetID()}

	res, err := c.dev.Reserve(ctx(t), &devicepb.ReserveRequest{DeviceIds: ids})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContainerRes().GetEnvs()["NVIDIA_VISIBLE_DEVICES"]; got != ids[0]+","+ids[1] {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES = %q", got)
	}
	if len(res.GetContainerRes().GetDevices()) != 0 {
		t.Fatalf("fake mode must not expose host device nodes: %v", res.GetContainerRes().GetDevices())
	}
	empty, err := c.dev.Reserve(ctx(t), &devicepb.ReserveRequest{})
	if err != nil || empty.GetContainerRes() == nil {
		t.Fatalf("empty Reserve = %v, %v", empty, err)
	}
	_, err = c.dev.Reserve(ctx(t), &devicepb.ReserveRequest{DeviceIds: []string{ids[0], "GPU-nope"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "unknown GPU IDs GPU-nope") {
		t.Fatalf("unknown ID: %v", err)
	}

	st, err := c.dev.Stats(ctx(t), &devicepb.StatsRequest{CollectionInterval: durationpb.New(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		g := r.GetGroups()[0]
		if g.GetVendor() != "nvidia" || g.GetType() != "gpu" || len(g.GetInstanceStats()) != 8 {
			t.Fatalf("stats group = %v", g)
		}
		s := g.GetInstanceStats()[ids[0]]
		if s.GetTimestamp() == nil || s.GetSummary().GetIntDenominatorVal().GetValue() != 81920 {
			t.Fatalf("stats = %v", s)
		}
		if p := s.GetStats().GetAttributes()["Power usage"]; p.GetUnit() != "W" || p.GetFloatNumeratorVal().GetValue() != 75 {
			t.Fatalf("power = %v", p)
		}
	}
}

func TestProbeWithoutGPU(t *testing.T) {
	out, err := exec.Command(pluginBin, "probe").CombinedOutput()
	if err == nil {
		t.Skip("skip: this host has NVML and GPUs")
	}
	if !strings.Contains(string(out), "NVML library libnvidia-ml.so.1 not found") {
		t.Fatalf("probe without GPU: %v\n%s", err, out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want 1", err)
	}
}

func TestProbeFake(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"probe", "-fake", "dgxh100"}, &out, &errb); code != 0 {
		t.Fatalf("probe -fake: %d %s", code, errb.String())
	}
	for _, want := range []string{"FAKE machine", "group nvidia/gpu/NVIDIA H100 80GB HBM3", "attr memory               81920 MiB", "healthy", "stat Power usage", "fingerprint valid for Nomad"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("probe output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "allot-nvml inject -state DIR CMD") {
		t.Fatalf("code %d, stderr %s", code, errb.String())
	}
}
