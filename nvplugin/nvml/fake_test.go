package nvml

import (
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/allot-sched/allot/nvplugin/faults"
)

func TestFakeInventory(t *testing.T) {
	d, err := Fake("dgxh100", "host-a", "", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Init(); err != nil {
		t.Fatal(err)
	}
	inv, err := d.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 8 || inv.DriverVersion != "550.54.15" || inv.CUDAVersion != "12.4" {
		t.Fatalf("inventory = %d GPUs, driver %q, CUDA %q", len(inv.GPUs), inv.DriverVersion, inv.CUDAVersion)
	}
	g := inv.GPUs[2]
	if g.UUID != FakeUUID("host-a", "dgxh100", 2) || g.Name != "NVIDIA H100 80GB HBM3" || g.PCIBusID != "0000:3a:00.0" ||
		g.MemoryMiB != 81920 || g.ComputeCap != "9.0" || g.PCIeMBps != 16*3072 || g.Persistence == nil || !*g.Persistence || g.Lost || g.Err != "" {
		t.Fatalf("GPU 2 = %+v", g)
	}
	other, _ := Fake("dgxh100", "host-b", "", time.Now)
	other.Init()
	inv2, _ := other.Inventory()
	if inv2.GPUs[0].UUID == inv.GPUs[0].UUID {
		t.Fatal("two seeds gave the same UUIDs")
	}
}

func TestFakeFaultsAndEvents(t *testing.T) {
	dir := t.TempDir()
	d, _ := Fake("dgxh100", "h", dir, time.Now)
	d.Init()
	inv, _ := d.Inventory()
	uuid := inv.GPUs[1].UUID
	ev, failed, err := d.WatchXIDs()
	if err != nil || len(failed) != 0 {
		t.Fatal(err, failed)
	}
	defer ev.Close()
	if _, ok, err := ev.Wait(10 * time.Millisecond); ok || err != nil {
		t.Fatalf("event before any fault: %v %v", ok, err)
	}
	now := time.Now()
	for _, c := range [][]string{{"xid", "79", uuid}, {"lost", uuid}} {
		if err := faults.Inject(dir, c, now); err != nil {
			t.Fatal(err)
		}
	}
	e, ok, err := ev.Wait(5 * time.Second)
	if !ok || err != nil || e != (Event{UUID: uuid, XID: 79}) {
		t.Fatalf("Wait = %+v %v %v", e, ok, err)
	}
	if o := d.Observe(uuid); !o.Lost {
		t.Fatalf("Observe after lost = %+v", o)
	}
	before := *d.Observe(inv.GPUs[0].UUID).EnergyMJ
	faults.Inject(dir, []string{"clear"}, now)
	o := d.Observe(uuid)
	if o.Lost || o.EnergyMJ == nil || *o.EnergyMJ >= before {
		t.Fatalf("after clear: %+v (energy before %d)", o, before)
	}
}

func TestBusID(t *testing.T) {
	var p gonvml.PciInfo
	for i, c := range "00000000:3B:00.0" {
		p.BusId[i] = int8(c)
	}
	if got := busID(p); got != "0000:3b:00.0" {
		t.Fatalf("busID = %q", got)
	}
}

func TestRealWithoutLibrary(t *testing.T) {
	d := Real()
	err := d.Init()
	if err == nil {
		d.Shutdown()
		t.Skip("skip: this host has an NVML library")
	}
	if err != ErrNoNVML {
		t.Fatalf("Init = %v, want ErrNoNVML", err)
	}
}

func TestFakeDoesNotReplayOldXIDs(t *testing.T) {
	dir := t.TempDir()
	uuid := FakeUUID("h", "dgxh100", 0)
	if err := faults.Inject(dir, []string{"xid", "79", uuid}, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	d, _ := Fake("dgxh100", "h", dir, time.Now)
	d.Init()
	d.Inventory()
	ev, _, _ := d.WatchXIDs()
	defer ev.Close()
	if e, ok, err := ev.Wait(300 * time.Millisecond); ok || err != nil {
		t.Fatalf("an XID from before the start was delivered: %+v %v", e, err)
	}
}
