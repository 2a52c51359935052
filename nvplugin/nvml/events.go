package nvml

import (
	"fmt"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// xidEvents is the event mask registered on each GPU; only XID events are
// acted on (ECC is polled), as NVIDIA's k8s-device-plugin does.
const xidEvents = uint64(gonvml.EventTypeXidCriticalError)

// Event is one XID event.
type Event struct {
	UUID string
	XID  uint64
}

// Events is an NVML event set registered for XID events. Wait may be called
// from one goroutine at a time; Close after the last Wait.
type Events struct {
	set gonvml.EventSet
}

// WatchXIDs registers every GPU of the last Inventory for XID events. GPUs that
// do not support events are skipped; other registration failures are returned
// per UUID, next to a usable Events.
func (d *Driver) WatchXIDs() (*Events, map[string]string, error) {
	set, ret := d.lib.EventSetCreate()
	if ret != gonvml.SUCCESS {
		return nil, nil, fmt.Errorf("nvmlEventSetCreate: %s", errString(ret))
	}
	failed := map[string]string{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for uuid, dev := range d.handles {
		mask, ret := dev.GetSupportedEventTypes()
		if ret == gonvml.ERROR_NOT_SUPPORTED || (ret == gonvml.SUCCESS && mask&xidEvents == 0) {
			continue
		}
		if ret != gonvml.SUCCESS {
			failed[uuid] = "nvmlDeviceGetSupportedEventTypes: " + errString(ret)
			continue
		}
		if ret := dev.RegisterEvents(mask&xidEvents, set); ret != gonvml.SUCCESS && ret != gonvml.ERROR_NOT_SUPPORTED {
			failed[uuid] = "nvmlDeviceRegisterEvents: " + errString(ret)
		}
	}
	return &Events{set: set}, failed, nil
}

// Wait blocks up to timeout for the next XID event; ok is false on timeout.
func (e *Events) Wait(timeout time.Duration) (ev Event, ok bool, err error) {
	data, ret := e.set.Wait(uint32(timeout.Milliseconds()))
	switch ret {
	case gonvml.SUCCESS:
	case gonvml.ERROR_TIMEOUT:
		return Event{}, false, nil
	default:
		return Event{}, false, fmt.Errorf("nvmlEventSetWait: %s", errString(ret))
	}
	if data.EventType&xidEvents == 0 || data.Device == nil {
		return Event{}, false, nil
	}
	uuid, ret := data.Device.GetUUID()
	if ret != gonvml.SUCCESS {
		return Event{}, false, fmt.Errorf("XID %d on a GPU whose UUID NVML cannot read: %s", data.EventData, errString(ret))
	}
	return Event{UUID: uuid, XID: data.EventData}, true, nil
}

// Close frees the event set.
func (e *Events) Close() { e.set.Free() }
