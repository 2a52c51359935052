package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// XID is one injected XID event.
type XID struct {
	XID uint64    `json:"xid"`
	At  time.Time `json:"at"`
}

// State is the injected fault state of one fake GPU, stored as DIR/<uuid>.json.
type State struct {
	// Resets counts simulated GPU resets (`inject clear`); the fake restarts the
	// GPU's volatile counters whenever it changes.
	Resets int `json:"resets"`
	// XIDs are delivered once each, in order, through the fake's NVML event set.
	XIDs []XID `json:"xids,omitempty"`
	// UncorrectedECC is the volatile uncorrectable ECC count the fake reports.
	UncorrectedECC uint64 `json:"uncorrected_ecc,omitempty"`
	// RowRemapPending, RowRemapFailure and RetiredPagesPending are reported as is.
	RowRemapPending     bool `json:"row_remap_pending,omitempty"`
	RowRemapFailure     bool `json:"row_remap_failure,omitempty"`
	RetiredPagesPending bool `json:"retired_pages_pending,omitempty"`
	// Lost makes every NVML call on the GPU return ERROR_GPU_IS_LOST.
	Lost bool `json:"lost,omitempty"`
}

func path(dir, uuid string) string { return filepath.Join(dir, uuid+".json") }

// Load reads the state of one GPU; a GPU with no file has no faults.
func Load(dir, uuid string) (State, error) {
	var s State
	b, err := os.ReadFile(path(dir, uuid))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("fault state %s: %w", path(dir, uuid), err)
	}
	return s, nil
}

// Update applies fn to the state of one GPU and writes it back atomically
// (temporary file, then rename), so a reader never sees half a file. Two
// concurrent Updates of the same GPU may lose one of them.
func Update(dir, uuid string, fn func(*State)) error {
	if !strings.HasPrefix(uuid, "GPU-") || strings.ContainsAny(uuid, `/\`) {
		return fmt.Errorf("%q is not a GPU UUID: want GPU-<uuid> as listed by `allot-nvml probe` or the node's device instances", uuid)
	}
	s, err := Load(dir, uuid)
	if err != nil {
		return err
	}
	fn(&s)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path(dir, uuid))
}

// Known lists the GPUs that have a state file in dir.
func Known(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "GPU-*.json"))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(m))
	for i, p := range m {
		out[i] = strings.TrimSuffix(filepath.Base(p), ".json")
	}
	sort.Strings(out)
	return out, nil
}

// Usage describes the commands Inject accepts.
const Usage = `xid N GPU-<uuid>          deliver XID N (e.g. 79, GPU has fallen off the bus)
ecc N GPU-<uuid>          raise the volatile uncorrectable ECC count by N
remap pending|failure GPU-<uuid>
                          report a pending row remap or a row-remapping failure
retired GPU-<uuid>        report retired pages pending
lost GPU-<uuid>           make every NVML call on the GPU fail with GPU_IS_LOST
clear [GPU-<uuid>]        simulate a GPU reset: clear every fault (of one GPU, or all)`

// Inject applies one fault command (see Usage) to the state directory.
func Inject(dir string, args []string, now time.Time) error {
	bad := func() error {
		return fmt.Errorf("inject %s: want one of:\n%s", strings.Join(args, " "), Usage)
	}
	if len(args) == 0 {
		return bad()
	}
	switch {
	case args[0] == "xid" && len(args) == 3:
		n, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil {
			return fmt.Errorf("xid %q: want a non-negative integer", args[1])
		}
		return Update(dir, args[2], func(s *State) { s.XIDs = append(s.XIDs, XID{XID: n, At: now.UTC()}) })
	case args[0] == "ecc" && len(args) == 3:
		n, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("ecc %q: want a positive integer", args[1])
		}
		return Update(dir, args[2], func(s *State) { s.UncorrectedECC += n })
	case args[0] == "remap" && len(args) == 3 && (args[1] == "pending" || args[1] == "failure"):
		return Update(dir, args[2], func(s *State) {
			s.RowRemapPending = s.RowRemapPending || args[1] == "pending"
			s.RowRemapFailure = s.RowRemapFailure || args[1] == "failure"
		})
	case args[0] == "retired" && len(args) == 2:
		return Update(dir, args[1], func(s *State) { s.RetiredPagesPending = true })
	case args[0] == "lost" && len(args) == 2:
		return Update(dir, args[1], func(s *State) { s.Lost = true })
	case args[0] == "clear" && len(args) <= 2:
		gpus := args[1:]
		if len(gpus) == 0 {
			var err error
			if gpus, err = Known(dir); err != nil {
				return err
			}
		}
		for _, g := range gpus {
			if err := Update(dir, g, func(s *State) { *s = State{Resets: s.Resets + 1} }); err != nil {
				return err
			}
		}
		return nil
	}
	return bad()
}
