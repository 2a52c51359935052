package device

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	basepb "github.com/allot-sched/allot/nvplugin/proto/base"
	devicepb "github.com/allot-sched/allot/nvplugin/proto/device"
)

// Handshake is Nomad's go-plugin handshake: app protocol 2 (the gRPC plugin
// protocol of Nomad 0.9+) and Nomad's magic cookie.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  2,
	MagicCookieKey:   "NOMAD_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255",
}

// basePlugin and devicePlugin are the go-plugin set entries "base" and
// "device". On the server side each registers its service; on the client side
// (tests, tools) each returns the generated client.
type basePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl *Plugin
}

func (b *basePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	basepb.RegisterBasePluginServer(s, baseServer{Plugin: b.impl})
	return nil
}

func (b *basePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return basepb.NewBasePluginClient(c), nil
}

type devicePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl *Plugin
}

func (d *devicePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	devicepb.RegisterDevicePluginServer(s, deviceServer{Plugin: d.impl})
	return nil
}

func (d *devicePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return devicepb.NewDevicePluginClient(c), nil
}

// PluginSet returns the set a client dispenses from: "base" yields a
// basepb.BasePluginClient, "device" a devicepb.DevicePluginClient.
func PluginSet() plugin.PluginSet {
	return plugin.PluginSet{"base": &basePlugin{}, "device": &devicePlugin{}}
}

// Serve serves p to a Nomad client over go-plugin's gRPC transport until the
// client kills the process. log must write JSON to the original stderr.
func Serve(p *Plugin, log hclog.Logger) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{"base": &basePlugin{impl: p}, "device": &devicePlugin{impl: p}},
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          log,
	})
}
