package device

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devicepb "github.com/allot-sched/allot/nvplugin/proto/device"
)

// VisibleDevicesEnv is read by the NVIDIA container runtime (and by Nomad's
// docker driver, which switches to the nvidia runtime when it is set).
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// controlNodes are the NVIDIA device nodes every CUDA process opens besides
// its GPUs' /dev/nvidiaN.
var controlNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}

// Reserve returns the task's container reservation for the given GPUs:
// NVIDIA_VISIBLE_DEVICES with their UUIDs in request order, and on real
// hardware the device nodes (/dev/nvidiaN and the control nodes) that exist
// on this host, with cgroup permissions rwm. No mounts: the NVIDIA container
// runtime mounts the driver libraries. It always returns a reservation (empty
// for no IDs) and refuses IDs that are not in the current device set.
func (p *Plugin) Reserve(_ context.Context, req *devicepb.ReserveRequest) (*devicepb.ReserveResponse, error) {
	res := &devicepb.ContainerReservation{Envs: map[string]string{}}
	ids := req.GetDeviceIds()
	if len(ids) == 0 {
		return &devicepb.ReserveResponse{ContainerRes: res}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ignored := map[string]bool{}
	for _, id := range p.cfg.IgnoredGPUIDs {
		ignored[id] = true
	}
	var unknown []string
	for _, id := range ids {
		g, ok := p.known[id]
		if !ok || ignored[id] || !p.cfg.Enabled {
			unknown = append(unknown, id)
			continue
		}
		if st := p.tracker.Status(id); !st.Healthy {
			p.log.Warn("reserving an unhealthy GPU", "uuid", id, "health", st.Description)
		}
		if g.Minor >= 0 && !p.drv.IsFake() {
			addNode(res, fmt.Sprintf("/dev/nvidia%d", g.Minor))
		}
	}
	if len(unknown) > 0 {
		var valid []string
		for id := range p.known {
			if !ignored[id] {
				valid = append(valid, id)
			}
		}
		sort.Strings(valid)
		return nil, status.Errorf(codes.InvalidArgument, "unknown GPU IDs %s: this plugin reports %s",
			strings.Join(unknown, ", "), strings.Join(valid, ", "))
	}
	if len(res.Devices) > 0 {
		for _, n := range controlNodes {
			addNode(res, n)
		}
	}
	res.Envs[VisibleDevicesEnv] = strings.Join(ids, ",")
	return &devicepb.ReserveResponse{ContainerRes: res}, nil
}

// addNode exposes a device node to the task if it exists on this host.
func addNode(res *devicepb.ContainerReservation, path string) {
	if _, err := os.Stat(path); err != nil {
		return
	}
	res.Devices = append(res.Devices, &devicepb.DeviceSpec{TaskPath: path, HostPath: path, Permissions: "rwm"})
}
