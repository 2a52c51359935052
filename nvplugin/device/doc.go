// Package device is the allot-nvml Nomad device plugin: Nomad's BasePlugin and
// DevicePlugin gRPC services over go-plugin, the fingerprint loop that turns
// NVML inventory and health into device groups, Reserve, Stats and the probe
// report. It reaches NVML only through package nvplugin/nvml.
package device
